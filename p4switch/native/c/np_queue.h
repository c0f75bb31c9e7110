/* A bounded FIFO of events from a native thread to Python (packet-ins, frames for a Python pipeline,
 * digests, log lines, port notices), with an eventfd that becomes readable when the queue stops being
 * empty: the Python side blocks in poll() on it and costs nothing while nothing happens.
 *
 * Events are rare next to packets (or, for a Python pipeline, as slow as Python anyway), so each is one
 * malloc'd node; the queue holds at most `budget` bytes and counts what it had to drop. */
#ifndef NP_QUEUE_H
#define NP_QUEUE_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef struct np_event {
    uint32_t kind;
    uint32_t port;
    uint32_t len;  /* bytes of data that follow */
    uint32_t aux;  /* kind-specific (original frame length of a dump, digest id, ...) */
} np_event;

typedef struct np_qnode {
    struct np_qnode *next;
    np_event ev;
    uint8_t data[];
} np_qnode;

typedef struct np_queue {
    pthread_mutex_t lock;
    int efd;
    np_qnode *head, *tail;
    uint64_t bytes, budget, dropped;
} np_queue;

static int npq_init(np_queue *q, uint64_t budget) {
    memset(q, 0, sizeof *q);
    q->budget = budget;
    q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->efd < 0)
        return -1;
    pthread_mutex_init(&q->lock, NULL);
    return 0;
}

static void npq_destroy(np_queue *q) {
    np_qnode *n = q->head;
    while (n) {
        np_qnode *next = n->next;
        free(n);
        n = next;
    }
    q->head = q->tail = NULL;
    if (q->efd >= 0)
        close(q->efd);
    q->efd = -1;
    pthread_mutex_destroy(&q->lock);
}

/* Append one event whose data is a then b (either may be empty); 0 when it was dropped. */
static int npq_push2(np_queue *q, uint32_t kind, uint32_t port, uint32_t aux, const uint8_t *a, uint32_t alen,
                     const uint8_t *b, uint32_t blen) {
    uint64_t size = sizeof(np_qnode) + (uint64_t)alen + blen;
    pthread_mutex_lock(&q->lock);
    if (q->bytes + size > q->budget) {
        q->dropped++;
        pthread_mutex_unlock(&q->lock);
        return 0;
    }
    np_qnode *n = malloc(size);
    if (!n) {
        q->dropped++;
        pthread_mutex_unlock(&q->lock);
        return 0;
    }
    n->next = NULL;
    n->ev.kind = kind;
    n->ev.port = port;
    n->ev.len = alen + blen;
    n->ev.aux = aux;
    if (alen)
        memcpy(n->data, a, alen);
    if (blen)
        memcpy(n->data + alen, b, blen);
    int was_empty = q->head == NULL;
    if (q->tail)
        q->tail->next = n;
    else
        q->head = n;
    q->tail = n;
    q->bytes += size;
    pthread_mutex_unlock(&q->lock);
    if (was_empty) {
        uint64_t one = 1;
        ssize_t w = write(q->efd, &one, sizeof one);
        (void)w; /* EAGAIN only when the counter is already huge: the reader is awake anyway */
    }
    return 1;
}

static int npq_push(np_queue *q, uint32_t kind, uint32_t port, uint32_t aux, const uint8_t *data, uint32_t len) {
    return npq_push2(q, kind, port, aux, data, len, NULL, 0);
}

/* Take the oldest event: 1 and the event copied out (data truncated to cap bytes; ev->len is the
 * full length), 0 when the queue is empty (the eventfd is then drained, so poll() blocks again). */
static int npq_pop(np_queue *q, np_event *ev, uint8_t *buf, uint32_t cap) {
    pthread_mutex_lock(&q->lock);
    np_qnode *n = q->head;
    if (!n) {
        uint64_t count;
        ssize_t r = read(q->efd, &count, sizeof count);
        (void)r;
        pthread_mutex_unlock(&q->lock);
        return 0;
    }
    q->head = n->next;
    if (!q->head)
        q->tail = NULL;
    q->bytes -= sizeof(np_qnode) + n->ev.len;
    pthread_mutex_unlock(&q->lock);
    *ev = n->ev;
    memcpy(buf, n->data, n->ev.len < cap ? n->ev.len : cap);
    free(n);
    return 1;
}

#endif
