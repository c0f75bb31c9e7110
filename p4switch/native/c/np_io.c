/* p4switch's native packet I/O: one thread per switch that receives on every port through an AF_PACKET
 * TPACKET_V2 ring (the kernel writes frames into shared memory and hands them over one by one, so a
 * frame costs no system call and a lone frame is seen at once), runs each frame through the installed
 * pipeline without leaving C, and sends what comes out in one sendmmsg() per port and burst.
 *
 * The thread blocks in poll() while nothing arrives. Frames for the CPU port, frames for a pipeline
 * that runs in Python (np_io_set_pipeline(NULL)), dumps and port notices go to Python through an event
 * queue (np_queue.h). A port whose interface disappears is reported once, counted and no longer polled.
 * Deleting an interface first takes it down, and the socket's one error (ENETDOWN) can arrive while the
 * name still resolves: such a port is looked at again every NP_DOWN_RECHECK_MS until it is gone or up.
 * Optional pcap files per port (BMv2's --pcap), written once the rings are empty or a buffer is full.
 *
 * The same code is the bench's bare forwarder: np_io_set_bare() forwards every frame of one port to
 * another without a pipeline, the machine's limit for this I/O path. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "np_abi.h"
#include "np_queue.h"

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

#define NP_MAX_PORTS 64
#define NP_BURST 64            /* frames taken from one port before looking at the others */
#define NP_TX_BATCH 64         /* frames per sendmmsg() */
#define NP_TX_BYTES (1u << 20) /* bytes buffered per port before a send */
#define NP_RING_BYTES (1u << 20) /* per port, kernel memory mapped into the switch: 512 frames at 1500-byte
                                  * MTU, 64 at 9000; as the Python data plane's RING_BYTES */
#define NP_SOCKET_BUFFER (32 << 20)
#define NP_PCAP_BUFFER (256u << 10)
#define NP_QUEUE_BUDGET (64u << 20)
#define NP_DOWN_RECHECK_MS 100

/* event kinds (p4switch/native/io.py reads them) */
enum { NP_EV_PACKET_IN = 1, NP_EV_RX_FRAME = 2, NP_EV_DUMP_RX = 3, NP_EV_DUMP_TX = 4, NP_EV_PORT_LOST = 5,
       NP_EV_PORT_ERROR = 6 };

typedef struct np_pcap {
    int fd;
    uint32_t used;
    uint8_t *buf;
} np_pcap;

typedef struct np_port_stats {
    uint64_t rx, rx_bytes, tx, tx_bytes, tx_errors, rx_truncated, kernel_drops, errors;
} np_port_stats;

typedef struct np_port {
    int number;
    char ifname[IF_NAMESIZE];
    int ifindex;
    int fd;
    int filter_outgoing; /* the kernel could not be told to keep our own transmissions from us */
    int lost;
    int down; /* a socket error came while the interface was still there: rechecked until gone or up */
    uint8_t *ring;
    uint32_t frame_size, frames, next;
    size_t ring_bytes;
    np_port_stats stats;
    np_pcap pcap_in, pcap_out;
    /* transmit batch */
    struct mmsghdr msgs[NP_TX_BATCH];
    struct iovec iov[NP_TX_BATCH];
    uint32_t pending;
    uint32_t tx_used;
    uint8_t *tx_buf;
} np_port;

typedef struct np_io {
    np_port ports[NP_MAX_PORTS];
    int nports;
    int cpu_port;
    uint32_t dump_bytes;
    int wake_fd;
    volatile int stopping;
    pthread_t thread;
    int running;
    pthread_mutex_t lock; /* held while a burst runs and by np_io_send / np_io_set_pipeline / stats */
    const np_pipeline *pipe;
    int bare[NP_MAX_PORTS]; /* bare forwarder: port index -> port index, -1 none */
    int bare_mode;
    np_queue events;
    uint64_t tx_no_such_port;
    uint64_t wakeups; /* poll() returns: flat while the switch is idle */
    uint8_t vlan_buf[NP_MAX_FRAME + 4];
} np_io;

typedef struct np_sink {
    np_emit emit;
    np_io *io;
} np_sink;

/* ------------------------------------------------------------------------------------------ pcap */

static int pcap_open(np_pcap *p, const char *path) {
    p->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (p->fd < 0)
        return -1;
    p->buf = malloc(NP_PCAP_BUFFER);
    if (!p->buf) {
        close(p->fd);
        p->fd = -1;
        return -1;
    }
    /* magic, version 2.4, zone, sigfigs, snaplen, link type Ethernet: as p4switch.dataplane.PcapFile */
    uint32_t header[6] = {0xA1B2C3D4u, 2u | (4u << 16), 0, 0, NP_MAX_FRAME, 1};
    memcpy(p->buf, header, sizeof header);
    p->used = sizeof header;
    return 0;
}

static void pcap_flush(np_pcap *p) {
    uint32_t done = 0;
    while (p->fd >= 0 && done < p->used) {
        ssize_t w = write(p->fd, p->buf + done, p->used - done);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            break; /* a full disk loses capture, never frames */
        }
        done += (uint32_t)w;
    }
    p->used = 0;
}

static void pcap_write(np_pcap *p, const struct timespec *ts, const uint8_t *data, uint32_t len) {
    if (p->fd < 0)
        return;
    if (p->used + 16 + len > NP_PCAP_BUFFER)
        pcap_flush(p);
    if (16 + len > NP_PCAP_BUFFER)
        return;
    uint32_t rec[4] = {(uint32_t)ts->tv_sec, (uint32_t)(ts->tv_nsec / 1000), len, len};
    memcpy(p->buf + p->used, rec, sizeof rec);
    memcpy(p->buf + p->used + 16, data, len);
    p->used += 16 + len;
}

static void pcap_close(np_pcap *p) {
    pcap_flush(p);
    if (p->fd >= 0)
        close(p->fd);
    free(p->buf);
    p->fd = -1;
    p->buf = NULL;
}

/* ----------------------------------------------------------------------------------------- ports */

np_io *np_io_new(int cpu_port, uint32_t dump_bytes) {
    np_io *io = calloc(1, sizeof *io);
    if (!io)
        return NULL;
    io->cpu_port = cpu_port;
    io->dump_bytes = dump_bytes;
    io->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (io->wake_fd < 0 || npq_init(&io->events, NP_QUEUE_BUDGET) < 0) {
        if (io->wake_fd >= 0)
            close(io->wake_fd);
        free(io);
        return NULL;
    }
    pthread_mutex_init(&io->lock, NULL);
    for (int i = 0; i < NP_MAX_PORTS; i++)
        io->bare[i] = -1;
    return io;
}

static uint32_t interface_mtu(const char *ifname) {
    char path[96];
    snprintf(path, sizeof path, "/sys/class/net/%s/mtu", ifname);
    FILE *f = fopen(path, "r");
    unsigned mtu = 9000;
    if (f) {
        if (fscanf(f, "%u", &mtu) != 1)
            mtu = 9000;
        fclose(f);
    }
    return mtu;
}

static int setup_ring(np_port *p) {
    uint32_t needed = 64 + 18 + interface_mtu(p->ifname); /* tpacket2_hdr + sockaddr_ll, Ethernet + VLAN */
    uint32_t frame = 1;
    while (frame < needed)
        frame <<= 1;
    uint32_t block = frame > (1u << 16) ? frame : (1u << 16);
    uint32_t blocks = NP_RING_BYTES / block ? NP_RING_BYTES / block : 1;
    int version = TPACKET_V2;
    if (setsockopt(p->fd, SOL_PACKET, PACKET_VERSION, &version, sizeof version) < 0)
        return -1;
    struct tpacket_req req = {block, blocks, frame, blocks * (block / frame)};
    if (setsockopt(p->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) < 0)
        return -1;
    p->ring_bytes = (size_t)block * blocks;
    p->ring = mmap(NULL, p->ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
    if (p->ring == MAP_FAILED) {
        p->ring = NULL;
        return -1;
    }
    p->frame_size = frame;
    p->frames = req.tp_frame_nr;
    p->next = 0;
    return 0;
}

static void set_buffer(int fd, int forced, int normal, int size) {
    if (setsockopt(fd, SOL_SOCKET, forced, &size, sizeof size) < 0)
        setsockopt(fd, SOL_SOCKET, normal, &size, sizeof size);
}

/* Open switch port `number` on interface `ifname`; 0 on success, else -1 and a message in err. */
int np_io_add_port(np_io *io, int number, const char *ifname, const char *pcap_dir, char *err, int errlen) {
    if (io->nports >= NP_MAX_PORTS) {
        snprintf(err, errlen, "more than %d ports", NP_MAX_PORTS);
        return -1;
    }
    np_port *p = &io->ports[io->nports];
    memset(p, 0, sizeof *p);
    p->number = number;
    p->pcap_in.fd = p->pcap_out.fd = -1;
    snprintf(p->ifname, sizeof p->ifname, "%s", ifname);
    p->ifindex = (int)if_nametoindex(ifname);
    if (!p->ifindex) {
        snprintf(err, errlen, "%s: no such interface", ifname);
        return -1;
    }
    p->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    const char *step = "socket";
    if (p->fd < 0)
        goto fail;
    step = "receive ring";
    if (setup_ring(p) < 0)
        goto fail;
    struct sockaddr_ll addr = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = p->ifindex};
    step = "bind";
    if (bind(p->fd, (struct sockaddr *)&addr, sizeof addr) < 0)
        goto fail;
    struct packet_mreq mreq = {.mr_ifindex = p->ifindex, .mr_type = PACKET_MR_PROMISC};
    step = "promiscuous mode";
    if (setsockopt(p->fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mreq, sizeof mreq) < 0)
        goto fail;
    set_buffer(p->fd, SO_RCVBUFFORCE, SO_RCVBUF, NP_SOCKET_BUFFER);
    set_buffer(p->fd, SO_SNDBUFFORCE, SO_SNDBUF, NP_SOCKET_BUFFER);
    int one = 1;
    setsockopt(p->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
    p->filter_outgoing = setsockopt(p->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0;
    fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) | O_NONBLOCK);
    step = "transmit buffer";
    p->tx_buf = malloc(NP_TX_BYTES);
    if (!p->tx_buf)
        goto fail;
    if (pcap_dir && *pcap_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s_in.pcap", pcap_dir, ifname);
        step = "pcap file";
        if (pcap_open(&p->pcap_in, path) < 0)
            goto fail;
        snprintf(path, sizeof path, "%s/%s_out.pcap", pcap_dir, ifname);
        if (pcap_open(&p->pcap_out, path) < 0)
            goto fail;
    }
    io->nports++;
    return 0;
fail:
    snprintf(err, errlen, "%s: %s: %s", ifname, step, strerror(errno));
    pcap_close(&p->pcap_in);
    pcap_close(&p->pcap_out);
    free(p->tx_buf);
    if (p->ring)
        munmap(p->ring, p->ring_bytes);
    if (p->fd >= 0)
        close(p->fd);
    memset(p, 0, sizeof *p);
    return -1;
}

static np_port *port_by_number(np_io *io, uint32_t number) {
    for (int i = 0; i < io->nports; i++)
        if ((uint32_t)io->ports[i].number == number)
            return &io->ports[i];
    return NULL;
}

/* ------------------------------------------------------------------------------------------ send */

static void flush_port(np_io *io, np_port *p) {
    (void)io;
    uint32_t done = 0;
    while (done < p->pending) {
        int sent = sendmmsg(p->fd, p->msgs + done, p->pending - done, 0);
        if (sent < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == ENOBUFS) { /* the peer's queue is full: those frames are lost */
                p->stats.tx_errors += p->pending - done;
                break;
            }
            p->stats.tx_errors++; /* skip the frame the kernel refused and go on */
            done++;
            continue;
        }
        for (int i = 0; i < sent; i++) {
            p->stats.tx++;
            p->stats.tx_bytes += p->iov[done + i].iov_len;
        }
        done += (uint32_t)sent;
    }
    p->pending = 0;
    p->tx_used = 0;
}

static void queue_frame(np_io *io, np_port *p, const uint8_t *data, uint32_t len) {
    if (p->lost) {
        p->stats.tx_errors++;
        return;
    }
    if (p->pending == NP_TX_BATCH || p->tx_used + len > NP_TX_BYTES)
        flush_port(io, p);
    if (len > NP_TX_BYTES)
        return;
    uint8_t *slot = p->tx_buf + p->tx_used;
    memcpy(slot, data, len);
    p->iov[p->pending] = (struct iovec){slot, len};
    p->msgs[p->pending] = (struct mmsghdr){.msg_hdr = {.msg_iov = &p->iov[p->pending], .msg_iovlen = 1}};
    p->pending++;
    p->tx_used += len;
    if (p->pcap_out.fd >= 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        pcap_write(&p->pcap_out, &ts, data, len);
    }
    if (io->dump_bytes)
        npq_push(&io->events, NP_EV_DUMP_TX, p->number, len, data, len < io->dump_bytes ? len : io->dump_bytes);
}

static void sink_frame(np_emit *self, uint32_t port, const uint8_t *data, uint32_t len) {
    np_io *io = ((np_sink *)self)->io;
    if ((int)port == io->cpu_port) {
        npq_push(&io->events, NP_EV_PACKET_IN, port, 0, data, len);
        return;
    }
    np_port *p = port_by_number(io, port);
    if (!p) {
        io->tx_no_such_port++;
        return;
    }
    queue_frame(io, p, data, len);
}

/* Send one frame from Python (PacketOut results, a Python pipeline's output): 0 sent or queued, -1 no such
 * port. */
int np_io_send(np_io *io, uint32_t port, const uint8_t *data, uint32_t len) {
    pthread_mutex_lock(&io->lock);
    np_port *p = port_by_number(io, port);
    if (p) {
        queue_frame(io, p, data, len);
        flush_port(io, p);
        pcap_flush(&p->pcap_out);
    } else {
        io->tx_no_such_port++;
    }
    pthread_mutex_unlock(&io->lock);
    return p ? 0 : -1;
}

/* --------------------------------------------------------------------------------------- receive */

static void report_lost(np_io *io, np_port *p, int soerr) {
    p->lost = 1; /* the interface is gone: stop polling it for good */
    p->down = 0;
    npq_push(&io->events, NP_EV_PORT_LOST, p->number, (uint32_t)soerr, (const uint8_t *)p->ifname,
             (uint32_t)strlen(p->ifname));
}

static int iface_gone(const np_port *p) {
    return (int)if_nametoindex(p->ifname) != p->ifindex;
}

static int iface_up(const np_port *p) {
    struct ifreq ifr = {0};
    memcpy(ifr.ifr_name, p->ifname, sizeof ifr.ifr_name - 1);
    return ioctl(p->fd, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_UP);
}

static void port_error(np_io *io, np_port *p) {
    int soerr = 0;
    socklen_t size = sizeof soerr;
    getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &soerr, &size); /* reading the error clears it */
    p->stats.errors++;
    if (iface_gone(p)) {
        report_lost(io, p, soerr);
        return;
    }
    p->down = 1;
    if (p->stats.errors == 1)
        npq_push(&io->events, NP_EV_PORT_ERROR, p->number, (uint32_t)soerr, (const uint8_t *)p->ifname,
                 (uint32_t)strlen(p->ifname));
}

/* A port that went down may be on its way out (no second error comes when it is deleted) or back up (the
 * kernel binds the socket again by itself); 1 while some port is still down. */
static int recheck_down(np_io *io) {
    int any = 0;
    for (int i = 0; i < io->nports; i++) {
        np_port *p = &io->ports[i];
        if (!p->down)
            continue;
        if (iface_gone(p))
            report_lost(io, p, ENODEV);
        else if (iface_up(p))
            p->down = 0;
        else
            any = 1;
    }
    return any;
}

static void deliver(np_io *io, np_port *p, const uint8_t *frame, uint32_t len, const struct timespec *ts,
                    np_sink *sink) {
    p->stats.rx++;
    p->stats.rx_bytes += len;
    if (p->pcap_in.fd >= 0)
        pcap_write(&p->pcap_in, ts, frame, len);
    if (io->dump_bytes)
        npq_push(&io->events, NP_EV_DUMP_RX, p->number, len, frame, len < io->dump_bytes ? len : io->dump_bytes);
    if (io->bare_mode) {
        int to = io->bare[p - io->ports];
        if (to >= 0)
            queue_frame(io, &io->ports[to], frame, len);
        return;
    }
    if (io->pipe)
        io->pipe->process(io->pipe->sw, (uint32_t)p->number, frame, len, &sink->emit);
    else
        npq_push(&io->events, NP_EV_RX_FRAME, p->number, 0, frame, len);
}

/* Take up to NP_BURST frames from the port's ring; 1 when more may be waiting. */
static int drain_port(np_io *io, np_port *p, np_sink *sink) {
    int count = 0;
    while (count < NP_BURST) {
        struct tpacket2_hdr *h = (struct tpacket2_hdr *)(p->ring + (size_t)p->next * p->frame_size);
        if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER))
            return 0;
        const struct sockaddr_ll *sll = (const struct sockaddr_ll *)((uint8_t *)h + TPACKET_ALIGN(sizeof *h));
        uint32_t len = h->tp_snaplen;
        const uint8_t *frame = (const uint8_t *)h + h->tp_mac;
        int skip = p->filter_outgoing && sll->sll_pkttype == PACKET_OUTGOING;
        if (!skip && h->tp_snaplen < h->tp_len) {
            p->stats.rx_truncated++;
            skip = 1;
        }
        if (!skip && h->tp_mac + len > p->frame_size)
            skip = 1; /* never read past the slot, whatever the header says */
        if (!skip) {
            if ((h->tp_status & TP_STATUS_VLAN_VALID) && len >= 12 && len + 4 <= sizeof io->vlan_buf) {
                /* the kernel strips the 802.1Q tag: put it back after the MAC addresses, as libpcap does */
                uint16_t tpid = (h->tp_status & TP_STATUS_VLAN_TPID_VALID) ? h->tp_vlan_tpid : ETH_P_8021Q;
                uint16_t tag[2] = {htons(tpid), htons(h->tp_vlan_tci)};
                memcpy(io->vlan_buf, frame, 12);
                memcpy(io->vlan_buf + 12, tag, 4);
                memcpy(io->vlan_buf + 16, frame + 12, len - 12);
                frame = io->vlan_buf;
                len += 4;
            }
            struct timespec ts = {h->tp_sec, h->tp_nsec};
            deliver(io, p, frame, len, &ts, sink);
        }
        __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
        p->next = (p->next + 1) % p->frames;
        count++;
    }
    return 1;
}

static void *io_thread(void *arg) {
    np_io *io = arg;
    struct pollfd pfds[NP_MAX_PORTS + 1];
    np_sink sink = {{sink_frame}, io};
    int more = 0, down = 0;
    while (!io->stopping) {
        pfds[0] = (struct pollfd){io->wake_fd, POLLIN, 0};
        for (int i = 0; i < io->nports; i++)
            pfds[i + 1] = (struct pollfd){io->ports[i].lost ? -1 : io->ports[i].fd, POLLIN, 0};
        int n = poll(pfds, (nfds_t)io->nports + 1, more ? 0 : down ? NP_DOWN_RECHECK_MS : -1);
        if (n < 0 && errno != EINTR)
            break;
        __atomic_add_fetch(&io->wakeups, 1, __ATOMIC_RELAXED);
        if (pfds[0].revents & POLLIN) {
            uint64_t count;
            ssize_t r = read(io->wake_fd, &count, sizeof count);
            (void)r;
        }
        pthread_mutex_lock(&io->lock);
        const np_pipeline *pipe = io->pipe;
        if (pipe && !io->bare_mode)
            pipe->lock(pipe->sw);
        more = 0;
        for (int i = 0; i < io->nports; i++) {
            np_port *p = &io->ports[i];
            if (p->lost)
                continue;
            if (pfds[i + 1].revents & (POLLERR | POLLHUP | POLLNVAL))
                port_error(io, p);
            if (!p->lost)
                more |= drain_port(io, p, &sink); /* the ring is looked at even without POLLIN: it is cheap */
        }
        if (pipe && !io->bare_mode)
            pipe->unlock(pipe->sw);
        down = recheck_down(io);
        for (int i = 0; i < io->nports; i++) {
            np_port *p = &io->ports[i];
            if (p->pending)
                flush_port(io, p);
            if (more)
                continue; /* captures are written when the rings are empty (or a buffer is full): one
                           * write per burst cost --pcap a quarter of the switch's CPU */
            if (p->pcap_in.used)
                pcap_flush(&p->pcap_in);
            if (p->pcap_out.used)
                pcap_flush(&p->pcap_out);
        }
        pthread_mutex_unlock(&io->lock);
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------------- control */

int np_io_start(np_io *io) {
    if (io->running)
        return 0;
    io->stopping = 0;
    if (pthread_create(&io->thread, NULL, io_thread, io) != 0)
        return -1;
    io->running = 1;
    return 0;
}

static void wake(np_io *io) {
    uint64_t one = 1;
    ssize_t w = write(io->wake_fd, &one, sizeof one);
    (void)w;
}

/* Make `pipe` the pipeline frames go through (NULL: every frame goes to Python as an NP_EV_RX_FRAME
 * event). Returns once no burst runs the old one, so its owner may free it. */
void np_io_set_pipeline(np_io *io, const np_pipeline *pipe) {
    pthread_mutex_lock(&io->lock);
    io->pipe = pipe;
    pthread_mutex_unlock(&io->lock);
}

/* Bare forwarder: every frame received on port number `from` leaves on port number `to`. */
int np_io_set_bare(np_io *io, int from, int to) {
    np_port *a = port_by_number(io, (uint32_t)from), *b = port_by_number(io, (uint32_t)to);
    if (!a || !b)
        return -1;
    pthread_mutex_lock(&io->lock);
    io->bare[a - io->ports] = (int)(b - io->ports);
    io->bare_mode = 1;
    pthread_mutex_unlock(&io->lock);
    return 0;
}

int np_io_event_fd(np_io *io) {
    return io->events.efd;
}

/* Pop one event for Python: 1 and the event (data copied to buf, up to cap bytes), 0 none. */
int np_io_next_event(np_io *io, np_event *ev, uint8_t *buf, uint32_t cap) {
    return npq_pop(&io->events, ev, buf, cap);
}

uint64_t np_io_events_dropped(np_io *io) {
    pthread_mutex_lock(&io->events.lock);
    uint64_t n = io->events.dropped;
    pthread_mutex_unlock(&io->events.lock);
    return n;
}

int np_io_port_count(np_io *io) {
    return io->nports;
}

/* The counters of the port at `index` (in np_io_add_port order), the kernel's ring drops included. */
int np_io_port_stats(np_io *io, int index, np_port_stats *out) {
    if (index < 0 || index >= io->nports)
        return -1;
    pthread_mutex_lock(&io->lock);
    np_port *p = &io->ports[index];
    struct tpacket_stats ks;
    socklen_t size = sizeof ks;
    if (!p->lost && getsockopt(p->fd, SOL_PACKET, PACKET_STATISTICS, &ks, &size) == 0)
        p->stats.kernel_drops += ks.tp_drops; /* the kernel resets them on every read */
    *out = p->stats;
    pthread_mutex_unlock(&io->lock);
    return 0;
}

int np_io_port_lost(np_io *io, int index) {
    return index >= 0 && index < io->nports && io->ports[index].lost;
}

uint64_t np_io_tx_no_such_port(np_io *io) {
    return io->tx_no_such_port;
}

/* How often the I/O thread woke up: a switch that spins shows it here. */
uint64_t np_io_wakeups(np_io *io) {
    return __atomic_load_n(&io->wakeups, __ATOMIC_RELAXED);
}

void np_io_stop(np_io *io) {
    if (!io->running)
        return;
    io->stopping = 1;
    wake(io);
    pthread_join(io->thread, NULL);
    io->running = 0;
}

void np_io_free(np_io *io) {
    if (!io)
        return;
    np_io_stop(io);
    for (int i = 0; i < io->nports; i++) {
        np_port *p = &io->ports[i];
        pcap_close(&p->pcap_in);
        pcap_close(&p->pcap_out);
        free(p->tx_buf);
        if (p->ring)
            munmap(p->ring, p->ring_bytes);
        close(p->fd);
    }
    npq_destroy(&io->events);
    close(io->wake_fd);
    pthread_mutex_destroy(&io->lock);
    free(io);
}
