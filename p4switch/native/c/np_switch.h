/* The native switch object and what generated code calls per packet: the state of one running program
 * (tables, action profiles, counters, meters, registers, multicast groups, clone sessions, statistics,
 * the event queue to Python) and the per-packet context `np_x`. Included by the generated source after
 * np_runtime.h and before the program's own code. */
#ifndef NP_SWITCH_H
#define NP_SWITCH_H

#include "np_runtime.h"

/* statistics, in the order p4switch/engine/native.py names them; parser errors follow, one per code */
enum { NP_STAT_RX, NP_STAT_TX, NP_STAT_DROPPED, NP_STAT_DIGEST, NP_STAT_CLONE, NP_STAT_MCAST_COPIES,
       NP_STAT_CLONE_NO_SESSION, NP_STAT_ASSERT_FAILED, NP_STAT_PARSER_REJECT, NP_STAT_INTERNAL_ERROR,
       NP_STAT_RESUBMIT, NP_STAT_RECIRCULATE, NP_STAT_RESUBMIT_LIMIT, NP_STAT_RECIRCULATE_LIMIT,
       NP_STAT_PARSER_ERROR };

/* events for Python (besides those of np_io.c) */
enum { NP_EV_DIGEST = 16, NP_EV_LOG_MSG = 17, NP_EV_ASSERT = 18, NP_EV_TRACE = 19 };

typedef struct np_switch {
    pthread_mutex_t lock;
    np_pipeline pipeline;
    np_table *tables;
    np_profile *profiles;
    np_counter *counters;
    np_meter_array *meters;
    np_register *registers;
    np_value_set *value_sets;
    np_hmap mcast, sessions; /* id -> np_replicas */
    np_queue events;
    np_mt rng;
    u64 *stats;
    int manual_clock;
    double now, start_time;
    int trace;
    int passes; /* resubmits and recirculations of the frame being processed (at most NP_MAX_PASSES) */
    uint8_t *outbuf; /* the deparser's output: headers, then the payload */
    u64 outcap;
    /* the frames of one np_process_frame call, for Python */
    uint8_t *collected;
    u64 collected_len, collected_cap;
    uint32_t *out_meta; /* (port, offset, length) per frame */
    uint32_t nout, cap_out;
} np_switch;

/* Per-packet state generated code reaches as X (switch.ExternCtx in the Python engine). */
typedef struct np_x {
    np_switch *sw;
    u64 length;
    int meter_color;
    void *sm; /* the standard metadata of the packet being processed */
    const uint8_t *payload;
    u64 payload_len;
    int clone_type; /* 0 none, 1 I2E, 2 E2E (the last call wins) */
    u64 clone_session;
    int clone_fl;   /* preserved field list (np_gen_preserve), 0 none */
    int again;      /* resubmit (asked in ingress) or recirculate (in egress); the last call wins */
    int again_fl;   /* its preserved field list */
    int exit;
    const uint8_t *data; /* parser input */
    u64 len, pos;
    uint8_t *out; /* deparser output */
    u64 out_len, out_cap;
    int overflow;
} np_x;

static inline double np_now(np_switch *sw) {
    if (sw->manual_clock)
        return sw->now;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline u64 np_timestamp(np_switch *sw) {
    return (u64)(s64)((np_now(sw) - sw->start_time) * 1e6) & 0xFFFFFFFFFFFFull;
}

/* ---------------------------------------------------------------------------------- table lookup */

static inline int np_scan_match(const np_table_desc *d, const np_entry *e, const u64 *k) {
    for (int f = 0; f < d->nkeys; f++) {
        const np_key_desc *kd = &d->keys[f];
        int w = kd->word;
        if (kd->kind == NP_KEY_RANGE) {
            if (kd->words == 1) {
                if (k[w] < e->key[w] || k[w] > e->mask[w])
                    return 0;
            } else {
                u128 v = ((u128)k[w + 1] << 64) | k[w];
                u128 lo = ((u128)e->key[w + 1] << 64) | e->key[w], hi = ((u128)e->mask[w + 1] << 64) | e->mask[w];
                if (v < lo || v > hi)
                    return 0;
            }
        } else {
            for (int i = w; i < w + kd->words; i++)
                if ((k[i] & e->mask[i]) != e->key[i])
                    return 0;
        }
    }
    return 1;
}

static np_entry *np_table_lookup(np_table *t, const u64 *k) {
    const np_table_desc *d = t->d;
    switch (d->mode) {
    case NP_TABLE_EXACT:
        return np_hmap_get(&t->exact, k);
    case NP_TABLE_LPM: {
        u64 masked[d->kw];
        memcpy(masked, k, sizeof masked);
        const np_key_desc *kd = &d->keys[d->lpm_key];
        for (int l = 0; l < t->nlevels; l++) {
            for (int i = kd->word; i < kd->word + kd->words; i++)
                masked[i] = k[i] & t->levels[l].mask[i];
            np_entry *e = np_hmap_get(&t->levels[l].map, masked);
            if (e)
                return e;
        }
        return NULL;
    }
    case NP_TABLE_SCAN:
        for (uint32_t i = 0; i < t->nscan; i++)
            if (np_scan_match(d, t->scan[i], k))
                return t->scan[i];
        return NULL;
    default:
        return NULL; /* a table without keys always misses, as in the Python engine */
    }
}

/* The member an entry of a table with an action profile runs: *out set (NULL for an empty group: the
 * default runs) and 0, or 1 when a selector group of several members must pick one by hash. */
static int np_profile_resolve(np_profile *p, const np_action_ref *ref, const np_action_ref **out,
                              np_group **group) {
    if (ref->kind == NP_REF_MEMBER) {
        np_member *m = np_hmap_get(&p->members, &ref->ref_id);
        *out = m ? &m->ref : NULL;
        return 0;
    }
    np_group *g = np_hmap_get(&p->groups, &ref->ref_id);
    if (!g || !g->n) {
        *out = NULL;
        return 0;
    }
    if (g->n == 1) {
        np_member *m = np_hmap_get(&p->members, &g->member_ids[0]);
        *out = m ? &m->ref : NULL;
        return 0;
    }
    *group = g;
    return 1;
}

static const np_action_ref *np_profile_pick(np_profile *p, np_group *g, const uint8_t *data, u64 len) {
    u64 h = np_hash2(p->d->algorithm, data, len, NULL, 0);
    np_member *m = np_hmap_get(&p->members, &g->member_ids[h % g->n]);
    return m ? &m->ref : NULL;
}

/* A select's keys (two words each, see np_value_set) are a member of the value set. */
static inline int np_value_set_has(const np_value_set *vs, const u64 *key) {
    return np_hmap_get(&vs->map, key) != NULL;
}

/* ----------------------------------------------------------------------------------- externs */

static inline void np_counter_count(np_counter *c, u128 index, u64 length) {
    if (index < c->size) { /* out of range: ignored, as BMv2 */
        c->cells[2 * (u64)index] += length;
        c->cells[2 * (u64)index + 1]++;
    }
}

static inline int np_meter_array_execute(np_switch *sw, np_meter_array *m, u128 index, u64 length) {
    if (index >= m->size)
        return NP_GREEN;
    return np_meter_execute(&m->cells[(u64)index], m->bytes ? length : 1, np_now(sw));
}

static inline u128 np_register_wrap(const np_register_desc *d, u128 v) {
    return d->is_signed ? (u128)np_sext128(v, d->width) : v & np_mask128(d->width);
}

static inline u128 np_register_read(np_register *r, u128 index) {
    return index < r->d->size ? r->cells[(u64)index] : 0;
}

static inline void np_register_write(np_register *r, u128 index, u128 value) {
    if (index < r->d->size)
        r->cells[(u64)index] = np_register_wrap(r->d, value);
}

/* values travel to Python as (low word, high word) pairs; Python knows their types */
static void np_push_values(np_x *X, uint32_t kind, uint32_t aux, const u128 *values, int n) {
    u64 words[2 * (n ? n : 1)];
    for (int i = 0; i < n; i++) {
        words[2 * i] = (u64)values[i];
        words[2 * i + 1] = (u64)(values[i] >> 64);
    }
    npq_push(&X->sw->events, kind, 0, aux, (const uint8_t *)words, (uint32_t)(16 * n));
}

static void np_digest(np_x *X, uint32_t id, const u128 *values, int n) {
    X->sw->stats[NP_STAT_DIGEST]++;
    np_push_values(X, NP_EV_DIGEST, id, values, n);
}

static void np_log_msg(np_x *X, uint32_t site, const u128 *values, int n) {
    np_push_values(X, NP_EV_LOG_MSG, site, values, n);
}

static void np_assert_failed(np_x *X, uint32_t site) {
    X->sw->stats[NP_STAT_ASSERT_FAILED]++;
    npq_push(&X->sw->events, NP_EV_ASSERT, 0, site, NULL, 0);
}

/* deparser: append bytes to the output, never past its end (overflow drops the frame as an internal
 * error; the output is sized for every emit of the program, so it never happens) */
static inline uint8_t *np_emit_space(np_x *X, u64 n) {
    if (X->out_len + n > X->out_cap) {
        X->overflow = 1;
        return NULL;
    }
    uint8_t *p = X->out + X->out_len;
    X->out_len += n;
    return p;
}

#endif
