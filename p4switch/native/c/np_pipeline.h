/* The v1model pipeline around a compiled program, as p4switch/engine/switch.py runs it (BMv2
 * simple_switch's order): parser -> verify checksum + ingress -> traffic manager (clone I2E, resubmit,
 * multicast, drop, unicast) -> egress (clone E2E) -> compute checksum + deparser (recirculate); and the C
 * API p4switch/engine/native.py drives (every function takes the switch's lock).
 *
 * Included at the end of the generated source, which defines the program: NP_H, NP_M, NP_SM (headers,
 * metadata, standard_metadata_t), np_gen_parse/ingress/egress/deparse/preserve, and the descriptions of
 * its tables, profiles, counters, meters and registers (np_gen_*). */
#ifndef NP_PIPELINE_H
#define NP_PIPELINE_H

#define NP_API __attribute__((visibility("default")))

/* ------------------------------------------------------------------------------- traffic manager */

typedef struct np_counting {
    np_emit emit;
    np_emit *inner;
    np_switch *sw;
} np_counting;

static void np_count_frame(np_emit *self, uint32_t port, const uint8_t *data, uint32_t len) {
    np_counting *c = (np_counting *)self;
    c->sw->stats[NP_STAT_TX]++;
    c->inner->frame(c->inner, port, data, len);
}

/* Fresh headers and metadata (`keep`: the metadata a resubmit or recirculate preserved, else zeros) for a
 * frame, parsed; returns where the payload starts. */
static u64 np_parse(np_switch *sw, np_x *X, uint32_t port, const uint8_t *frame, u64 len, NP_H *h, NP_M *m,
                    NP_SM *sm, const NP_M *keep) {
    memset(h, 0, sizeof *h);
    if (keep)
        *m = *keep;
    else
        memset(m, 0, sizeof *m);
    memset(sm, 0, sizeof *sm);
    sm->f_ingress_port = port;
    sm->f_packet_length = len;
    sm->f_ingress_global_timestamp = np_timestamp(sw);
    X->sm = sm;
    X->data = frame;
    X->len = len;
    X->pos = 0;
    int code = np_gen_parse(X, h, m, sm);
    if (code < 0) {
        sw->stats[NP_STAT_PARSER_REJECT]++; /* the program's own `transition reject`: NoError */
    } else if (code > 0) {
        sm->f_parser_error = (u64)code;
        if (code < NP_NERRORS)
            sw->stats[NP_STAT_PARSER_ERROR + code]++;
    }
    return X->pos < len ? X->pos : len;
}

static np_replicas *np_session(np_switch *sw, u64 id) {
    np_replicas *s = np_hmap_get(&sw->sessions, &id);
    if (!s)
        sw->stats[NP_STAT_CLONE_NO_SESSION]++;
    return s;
}

static void np_preserved(int fl, const NP_M *m, NP_M *fresh) {
    memset(fresh, 0, sizeof *fresh);
    np_gen_preserve(fl, m, fresh);
}

static void np_again(np_switch *sw, np_x *X, uint32_t port, const uint8_t *frame, u64 len, np_emit *out,
                     int instance_type, const NP_M *m, int fl);

static void np_egress(np_switch *sw, np_x *X, NP_H *h, NP_M *m, NP_SM *sm, const uint8_t *payload, u64 plen,
                      np_emit *out, int depth, uint32_t truncate) {
    X->clone_type = 0;
    X->again = 0;
    X->sm = sm;
    X->length = sm->f_packet_length;
    X->payload = payload;
    X->payload_len = plen;
    sm->f_egress_spec = 0;
#if NP_HAS_EGRESS
    sm->f_egress_global_timestamp = np_timestamp(sw);
    np_gen_egress(X, h, m, sm);
#endif
    int again = X->again, again_fl = X->again_fl; /* read before an E2E clone's own egress pass resets them */
    if (X->clone_type == 2 && depth < NP_MAX_CLONE_DEPTH) {
        u64 sid = X->clone_session;
        int fl = X->clone_fl;
        np_replicas *s = np_session(sw, sid);
        for (uint32_t i = 0; s && i < s->n; i++) {
            sw->stats[NP_STAT_CLONE]++;
            NP_H ch = *h;
            NP_M cm;
            NP_SM csm = *sm;
            np_preserved(fl, m, &cm);
            csm.f_instance_type = 2; /* PKT_INSTANCE_EGRESS_CLONE */
            csm.f_egress_port = s->r[i].port;
            csm.f_egress_rid = s->r[i].rid;
            np_egress(sw, X, &ch, &cm, &csm, payload, plen, out, depth + 1, s->truncate);
        }
    }
    if (sm->f_egress_spec == NP_DROP_PORT) {
        sw->stats[NP_STAT_DROPPED]++;
        return;
    }
    X->payload = payload;
    X->payload_len = plen;
    X->out_len = 0;
    X->overflow = 0;
    np_gen_deparse(X, h, m, sm);
    uint8_t *tail = np_emit_space(X, plen);
    if (X->overflow) {
        sw->stats[NP_STAT_INTERNAL_ERROR]++;
        return;
    }
    memcpy(tail, payload, plen);
    u64 n = X->out_len;
    if (truncate && n > truncate)
        n = truncate;
    if (again) { /* recirculate: the deparsed frame back to the parser; the next pass reuses X->out */
        uint8_t *copy = malloc(n ? n : 1);
        if (!copy) {
            sw->stats[NP_STAT_INTERNAL_ERROR]++;
            return;
        }
        memcpy(copy, X->out, n);
        np_again(sw, X, (uint32_t)sm->f_ingress_port, copy, n, out, 4 /* PKT_INSTANCE_RECIRC */, m, again_fl);
        free(copy);
        return;
    }
    out->frame(out, (uint32_t)sm->f_egress_port, X->out, (uint32_t)n);
}

static void np_ingress_clone(np_switch *sw, np_x *X, uint32_t port, const uint8_t *frame, u64 len, const NP_M *m,
                             u64 sid, int fl, np_emit *out) {
    np_replicas *s = np_session(sw, sid);
    for (uint32_t i = 0; s && i < s->n; i++) {
        sw->stats[NP_STAT_CLONE]++;
        NP_H ch;
        NP_M cm, unused;
        NP_SM csm;
        u64 pos = np_parse(sw, X, port, frame, len, &ch, &unused, &csm, NULL);
        np_preserved(fl, m, &cm);
        csm.f_instance_type = 1; /* PKT_INSTANCE_INGRESS_CLONE */
        csm.f_egress_port = s->r[i].port;
        csm.f_egress_rid = s->r[i].rid;
        np_egress(sw, X, &ch, &cm, &csm, frame + pos, len - pos, out, 1, s->truncate);
    }
}

/* Parser, ingress and the traffic manager for a frame: a received one (instance_type 0, keep NULL) or a
 * resubmitted or recirculated one (its instance_type and preserved metadata). */
static void np_ingress_pass(np_switch *sw, np_x *X, uint32_t port, const uint8_t *frame, u64 len, np_emit *out,
                            int instance_type, const NP_M *keep) {
    X->length = len;
    X->clone_type = 0;
    X->again = 0;
    X->meter_color = 0;
    NP_H h;
    NP_M m;
    NP_SM sm;
    u64 pos = np_parse(sw, X, port, frame, len, &h, &m, &sm, keep);
    if (instance_type)
        sm.f_instance_type = (u64)instance_type;
    X->payload = frame + pos;
    X->payload_len = len - pos;
    np_gen_ingress(X, &h, &m, &sm);
    int again = X->again, again_fl = X->again_fl; /* read before the I2E clone's egress pass resets them */
    if (X->clone_type == 1)
        np_ingress_clone(sw, X, port, frame, len, &m, X->clone_session, X->clone_fl, out);
    if (again) { /* resubmit: the frame as it came, the preserved fields kept */
        np_again(sw, X, port, frame, len, out, 6 /* PKT_INSTANCE_RESUBMIT */, &m, again_fl);
        return;
    }
    u64 group = sm.f_mcast_grp;
    if (group) {
        np_replicas *g = np_hmap_get(&sw->mcast, &group);
        uint32_t n = g ? g->n : 0;
        sw->stats[NP_STAT_MCAST_COPIES] += n;
        for (uint32_t i = 0; i < n; i++) {
            NP_H ch = h;
            NP_M cm = m;
            NP_SM csm = sm; /* the last copy is the original: its state is the same */
            csm.f_egress_port = g->r[i].port;
            csm.f_egress_rid = g->r[i].rid;
            csm.f_instance_type = 5; /* PKT_INSTANCE_REPLICATION */
            np_egress(sw, X, &ch, &cm, &csm, frame + pos, len - pos, out, 0, 0);
        }
        return;
    }
    if (sm.f_egress_spec == NP_DROP_PORT) {
        sw->stats[NP_STAT_DROPPED]++;
        return;
    }
    sm.f_egress_port = sm.f_egress_spec;
    np_egress(sw, X, &h, &m, &sm, frame + pos, len - pos, out, 0, 0);
}

/* A resubmitted (instance_type 6) or recirculated (4) frame goes through ingress again, at most
 * NP_MAX_PASSES times per received frame (switch.V1Switch._again). */
static void np_again(np_switch *sw, np_x *X, uint32_t port, const uint8_t *frame, u64 len, np_emit *out,
                     int instance_type, const NP_M *m, int fl) {
    int kind = instance_type == 6 ? NP_STAT_RESUBMIT : NP_STAT_RECIRCULATE;
    if (sw->passes >= NP_MAX_PASSES) {
        sw->stats[kind + NP_STAT_RESUBMIT_LIMIT - NP_STAT_RESUBMIT]++;
        return;
    }
    sw->passes++;
    sw->stats[kind]++;
    NP_M keep;
    np_preserved(fl, m, &keep);
    np_ingress_pass(sw, X, port, frame, len, out, instance_type, &keep);
}

static void np_run(np_switch *sw, uint32_t port, const uint8_t *frame, u64 len, np_emit *inner) {
    np_counting out = {{np_count_frame}, inner, sw};
    np_x X;
    memset(&X, 0, sizeof X);
    X.sw = sw;
    X.out = sw->outbuf;
    X.out_cap = sw->outcap;
    sw->stats[NP_STAT_RX]++;
    sw->passes = 0;
    np_ingress_pass(sw, &X, port, frame, len, &out.emit, 0, NULL);
}

/* ---------------------------------------------------------------------------- the I/O interface */

static void np_lock(void *sw) { pthread_mutex_lock(&((np_switch *)sw)->lock); }
static void np_unlock(void *sw) { pthread_mutex_unlock(&((np_switch *)sw)->lock); }
static void np_process_io(void *sw, uint32_t port, const uint8_t *frame, uint32_t len, np_emit *out) {
    np_run(sw, port, frame, len, out);
}

/* ------------------------------------------------------------------------------ create and free */

static void np_ref_free(np_action_ref *r) {
    free(r->args);
    r->args = NULL;
}

static int np_ref_set(np_action_ref *r, int kind, int action, u64 ref_id, const u64 *args, int nargs) {
    u64 *copy = NULL;
    if (nargs) {
        copy = malloc(sizeof(u64) * (size_t)nargs);
        if (!copy)
            return -1;
        memcpy(copy, args, sizeof(u64) * (size_t)nargs);
    }
    free(r->args);
    r->kind = kind;
    r->action = action;
    r->ref_id = ref_id;
    r->nargs = nargs;
    r->args = copy;
    return 0;
}

static void np_entry_free(np_entry *e) {
    np_ref_free(&e->ref);
    free(e);
}

static void np_free_map_items(np_hmap *m, void (*item_free)(void *)) {
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->slots && m->slots[i].item)
            item_free(m->slots[i].item);
    np_hmap_free(m);
}

static void np_entry_free_v(void *e) { np_entry_free(e); }
static void np_member_free_v(void *p) {
    np_member *m = p;
    np_ref_free(&m->ref);
    free(m);
}
static void np_group_free_v(void *p) {
    np_group *g = p;
    free(g->member_ids);
    free(g);
}
static void np_replicas_free_v(void *p) {
    np_replicas *r = p;
    free(r->r);
    free(r);
}

static void np_value_set_free(np_value_set *v) {
    np_hmap_free(&v->map);
    free(v->words);
    free(v->members);
}

static void np_table_free(np_table *t) {
    if (t->d->mode == NP_TABLE_EXACT)
        np_free_map_items(&t->exact, np_entry_free_v);
    for (int l = 0; l < t->nlevels; l++) {
        np_free_map_items(&t->levels[l].map, np_entry_free_v);
        free(t->levels[l].mask);
    }
    free(t->levels);
    for (uint32_t i = 0; i < t->nscan; i++)
        np_entry_free(t->scan[i]);
    free(t->scan);
    np_ref_free(&t->def);
}

NP_API void np_switch_free(np_switch *sw) {
    if (!sw)
        return;
    for (int i = 0; sw->tables && i < NP_NTABLES; i++)
        if (sw->tables[i].d)
            np_table_free(&sw->tables[i]);
    for (int i = 0; sw->profiles && i < NP_NPROFILES; i++) {
        np_free_map_items(&sw->profiles[i].members, np_member_free_v);
        np_free_map_items(&sw->profiles[i].groups, np_group_free_v);
    }
    for (int i = 0; sw->counters && i < NP_NCOUNTERS; i++)
        free(sw->counters[i].cells);
    for (int i = 0; sw->meters && i < NP_NMETERS; i++)
        free(sw->meters[i].cells);
    for (int i = 0; sw->registers && i < NP_NREGISTERS; i++)
        free(sw->registers[i].cells);
    for (int i = 0; sw->value_sets && i < NP_NVALUE_SETS; i++)
        np_value_set_free(&sw->value_sets[i]);
    free(sw->tables);
    free(sw->profiles);
    free(sw->counters);
    free(sw->meters);
    free(sw->registers);
    free(sw->value_sets);
    np_free_map_items(&sw->mcast, np_replicas_free_v);
    np_free_map_items(&sw->sessions, np_replicas_free_v);
    npq_destroy(&sw->events);
    free(sw->stats);
    free(sw->outbuf);
    free(sw->collected);
    free(sw->out_meta);
    pthread_mutex_destroy(&sw->lock);
    free(sw);
}

static int np_switch_alloc(np_switch *sw) {
    sw->tables = calloc(NP_NTABLES + 1, sizeof *sw->tables);
    sw->profiles = calloc(NP_NPROFILES + 1, sizeof *sw->profiles);
    sw->counters = calloc(NP_NCOUNTERS + 1, sizeof *sw->counters);
    sw->meters = calloc(NP_NMETERS + 1, sizeof *sw->meters);
    sw->registers = calloc(NP_NREGISTERS + 1, sizeof *sw->registers);
    sw->value_sets = calloc(NP_NVALUE_SETS + 1, sizeof *sw->value_sets);
    sw->stats = calloc(NP_STAT_PARSER_ERROR + NP_NERRORS, sizeof *sw->stats);
    sw->outcap = NP_MAX_FRAME + (NP_MAX_PASSES + 1) * NP_DEPARSE_BOUND; /* a recirculated frame may grow */
    sw->outbuf = malloc(sw->outcap);
    if (!sw->tables || !sw->profiles || !sw->counters || !sw->meters || !sw->registers || !sw->value_sets || !sw->stats || !sw->outbuf)
        return -1;
    if (np_hmap_init(&sw->mcast, 1, offsetof(np_replicas, keyp)) < 0 ||
        np_hmap_init(&sw->sessions, 1, offsetof(np_replicas, keyp)) < 0)
        return -1;
    for (int i = 0; i < NP_NTABLES; i++) {
        np_table *t = &sw->tables[i];
        t->d = &np_gen_tables[i];
        if (t->d->mode == NP_TABLE_EXACT && np_hmap_init(&t->exact, t->d->kw, offsetof(np_entry, key)) < 0)
            return -1;
        t->def.action = -1; /* no action until Python sets the program's default */
    }
    for (int i = 0; i < NP_NPROFILES; i++) {
        np_profile *p = &sw->profiles[i];
        p->d = &np_gen_profiles[i];
        if (np_hmap_init(&p->members, 1, offsetof(np_member, keyp)) < 0 ||
            np_hmap_init(&p->groups, 1, offsetof(np_group, keyp)) < 0)
            return -1;
    }
    for (int i = 0; i < NP_NCOUNTERS; i++) {
        sw->counters[i].size = np_gen_counter_sizes[i];
        sw->counters[i].cells = calloc(2 * np_gen_counter_sizes[i] + 1, sizeof(u64));
        if (!sw->counters[i].cells)
            return -1;
    }
    for (int i = 0; i < NP_NMETERS; i++) {
        sw->meters[i].size = np_gen_meter_sizes[i];
        sw->meters[i].bytes = np_gen_meter_bytes[i];
        sw->meters[i].cells = calloc(np_gen_meter_sizes[i] + 1, sizeof(np_meter));
        if (!sw->meters[i].cells)
            return -1;
    }
    for (int i = 0; i < NP_NREGISTERS; i++) {
        sw->registers[i].d = &np_gen_registers[i];
        sw->registers[i].cells = calloc(np_gen_registers[i].size + 1, sizeof(u128));
        if (!sw->registers[i].cells)
            return -1;
    }
    for (int i = 0; i < NP_NVALUE_SETS; i++) {
        np_value_set *v = &sw->value_sets[i];
        v->d = &np_gen_value_sets[i];
        if (np_hmap_init(&v->map, 2 * v->d->nfields, offsetof(np_vs_member, key)) < 0)
            return -1;
    }
    return 0;
}

/* A switch for the program. `now` starts its clock (meters, timestamps); with `manual_clock` the clock
 * only moves by np_set_clock. `mt` is Python's Mersenne Twister state (624 words and the index), so
 * random() draws what random.Random would. */
NP_API np_switch *np_switch_new(double now, int manual_clock, const uint32_t *mt) {
    pthread_once(&np_tables_once, np_make_tables);
    np_switch *sw = calloc(1, sizeof *sw);
    if (!sw)
        return NULL;
    pthread_mutex_init(&sw->lock, NULL);
    if (npq_init(&sw->events, NP_EVENT_BUDGET) < 0) {
        pthread_mutex_destroy(&sw->lock);
        free(sw);
        return NULL;
    }
    if (np_switch_alloc(sw) < 0) {
        np_switch_free(sw);
        return NULL;
    }
    sw->manual_clock = manual_clock;
    sw->now = now;
    sw->start_time = now;
    memcpy(sw->rng.mt, mt, sizeof sw->rng.mt);
    sw->rng.index = (int)mt[624];
    sw->pipeline = (np_pipeline){sw, np_lock, np_unlock, np_process_io};
    return sw;
}

NP_API const np_pipeline *np_switch_pipeline(np_switch *sw) { return &sw->pipeline; }

NP_API void np_set_clock(np_switch *sw, double now) {
    pthread_mutex_lock(&sw->lock);
    sw->now = now;
    pthread_mutex_unlock(&sw->lock);
}

NP_API int np_switch_event_fd(np_switch *sw) { return sw->events.efd; }

NP_API int np_switch_next_event(np_switch *sw, np_event *ev, uint8_t *buf, uint32_t cap) {
    return npq_pop(&sw->events, ev, buf, cap);
}

NP_API int np_stat_count(void) { return NP_STAT_PARSER_ERROR + NP_NERRORS; }

NP_API void np_stats(np_switch *sw, u64 *out) {
    pthread_mutex_lock(&sw->lock);
    memcpy(out, sw->stats, sizeof(u64) * (size_t)(NP_STAT_PARSER_ERROR + NP_NERRORS));
    pthread_mutex_unlock(&sw->lock);
}

/* ------------------------------------------------------------------------- frames from Python */

typedef struct np_collect {
    np_emit emit;
    np_switch *sw;
} np_collect;

static void np_collect_frame(np_emit *self, uint32_t port, const uint8_t *data, uint32_t len) {
    np_switch *sw = ((np_collect *)self)->sw;
    if (sw->collected_len + len > sw->collected_cap) {
        u64 cap = (sw->collected_len + len) * 2 + 4096;
        uint8_t *bigger = realloc(sw->collected, cap);
        if (!bigger) {
            sw->stats[NP_STAT_INTERNAL_ERROR]++;
            return;
        }
        sw->collected = bigger;
        sw->collected_cap = cap;
    }
    if (sw->nout == sw->cap_out) {
        uint32_t cap = sw->cap_out * 2 + 16;
        uint32_t *bigger = realloc(sw->out_meta, sizeof(uint32_t) * 3 * cap);
        if (!bigger) {
            sw->stats[NP_STAT_INTERNAL_ERROR]++;
            return;
        }
        sw->out_meta = bigger;
        sw->cap_out = cap;
    }
    memcpy(sw->collected + sw->collected_len, data, len);
    sw->out_meta[3 * sw->nout] = port;
    sw->out_meta[3 * sw->nout + 1] = (uint32_t)sw->collected_len;
    sw->out_meta[3 * sw->nout + 2] = len;
    sw->collected_len += len;
    sw->nout++;
}

/* Run one frame; the frames that leave are then read with np_collected / np_collected_meta (valid
 * until the next call). Returns how many. */
NP_API uint32_t np_process_frame(np_switch *sw, uint32_t port, const uint8_t *frame, uint32_t len) {
    np_collect sink = {{np_collect_frame}, sw};
    pthread_mutex_lock(&sw->lock);
    sw->collected_len = 0;
    sw->nout = 0;
    np_run(sw, port, frame, len, &sink.emit);
    uint32_t n = sw->nout;
    pthread_mutex_unlock(&sw->lock);
    return n;
}

NP_API const uint8_t *np_collected(np_switch *sw) { return sw->collected; }
NP_API const uint32_t *np_collected_meta(np_switch *sw) { return sw->out_meta; }

/* ---------------------------------------------------------------------------------------- tables */

/* the entry with exactly this key, mask words and priority (the control plane's identity of an entry) */
static np_entry *np_table_find(np_table *t, const u64 *key, const u64 *mask, int prefix_len, int32_t priority,
                               uint32_t *scan_index, int *level) {
    const np_table_desc *d = t->d;
    if (d->mode == NP_TABLE_EXACT)
        return np_hmap_get(&t->exact, key);
    if (d->mode == NP_TABLE_LPM) {
        for (int l = 0; l < t->nlevels; l++)
            if (t->levels[l].prefix_len == prefix_len) {
                *level = l;
                return np_hmap_get(&t->levels[l].map, key);
            }
        return NULL;
    }
    for (uint32_t i = 0; i < t->nscan; i++) {
        np_entry *e = t->scan[i];
        if (e->priority == priority && !memcmp(e->key, key, sizeof(u64) * (size_t)d->kw) &&
            !memcmp(e->mask, mask, sizeof(u64) * (size_t)d->kw)) {
            *scan_index = i;
            return e;
        }
    }
    return NULL;
}

static np_lpm_level *np_lpm_level_for(np_table *t, int prefix_len) {
    for (int l = 0; l < t->nlevels; l++)
        if (t->levels[l].prefix_len == prefix_len)
            return &t->levels[l];
    np_lpm_level *bigger = realloc(t->levels, sizeof *bigger * (size_t)(t->nlevels + 1));
    if (!bigger)
        return NULL;
    t->levels = bigger;
    int at = 0; /* longest prefix first */
    while (at < t->nlevels && t->levels[at].prefix_len > prefix_len)
        at++;
    memmove(&t->levels[at + 1], &t->levels[at], sizeof *bigger * (size_t)(t->nlevels - at));
    np_lpm_level *lv = &t->levels[at];
    memset(lv, 0, sizeof *lv);
    lv->prefix_len = prefix_len;
    const np_key_desc *kd = &t->d->keys[t->d->lpm_key];
    lv->mask = malloc(sizeof(u64) * (size_t)t->d->kw);
    if (!lv->mask || np_hmap_init(&lv->map, t->d->kw, offsetof(np_entry, key)) < 0) {
        free(lv->mask);
        memmove(&t->levels[at], &t->levels[at + 1], sizeof *bigger * (size_t)(t->nlevels - at));
        return NULL;
    }
    for (int i = 0; i < t->d->kw; i++)
        lv->mask[i] = ~(u64)0;
    u128 m = prefix_len ? np_mask128(prefix_len) << (kd->width - prefix_len) : 0;
    lv->mask[kd->word] = (u64)m;
    if (kd->words == 2)
        lv->mask[kd->word + 1] = (u64)(m >> 64);
    t->nlevels++;
    return lv;
}

static void np_lpm_drop_level(np_table *t, int l) {
    np_hmap_free(&t->levels[l].map);
    free(t->levels[l].mask);
    memmove(&t->levels[l], &t->levels[l + 1], sizeof *t->levels * (size_t)(t->nlevels - l - 1));
    t->nlevels--;
}

/* Add an entry (the Python side has validated it and knows it is new). 0, or -1 out of memory. */
NP_API int np_table_insert(np_switch *sw, int table, const u64 *key, const u64 *mask, int prefix_len,
                           int32_t priority, u64 seq, int kind, int action, u64 ref_id, const u64 *args,
                           int nargs, u64 bytes, u64 packets, const np_meter_config *meter) {
    np_table *t = &sw->tables[table];
    int kw = t->d->kw;
    np_entry *e = calloc(1, sizeof *e + 2 * sizeof(u64) * (size_t)kw);
    if (!e)
        return -1;
    e->key = (u64 *)(e + 1);
    e->mask = e->key + kw;
    memcpy(e->key, key, sizeof(u64) * (size_t)kw);
    memcpy(e->mask, mask, sizeof(u64) * (size_t)kw);
    e->priority = priority;
    e->seq = seq;
    e->bytes = bytes;
    e->packets = packets;
    pthread_mutex_lock(&sw->lock);
    int rc = np_ref_set(&e->ref, kind, action, ref_id, args, nargs);
    if (rc == 0 && meter)
        np_meter_configure(&e->meter, meter, np_now(sw));
    if (rc == 0 && t->d->mode == NP_TABLE_EXACT) {
        rc = np_hmap_put(&t->exact, e);
    } else if (rc == 0 && t->d->mode == NP_TABLE_LPM) {
        np_lpm_level *lv = np_lpm_level_for(t, prefix_len);
        rc = lv ? np_hmap_put(&lv->map, e) : -1;
    } else if (rc == 0) {
        if (t->nscan == t->cap_scan) {
            uint32_t cap = t->cap_scan * 2 + 8;
            np_entry **bigger = realloc(t->scan, sizeof *bigger * cap);
            if (bigger) {
                t->scan = bigger;
                t->cap_scan = cap;
            } else {
                rc = -1;
            }
        }
        if (rc == 0) { /* higher priority first, then older first */
            uint32_t at = t->nscan;
            while (at > 0 && (t->scan[at - 1]->priority < priority ||
                              (t->scan[at - 1]->priority == priority && t->scan[at - 1]->seq > seq)))
                at--;
            memmove(&t->scan[at + 1], &t->scan[at], sizeof *t->scan * (t->nscan - at));
            t->scan[at] = e;
            t->nscan++;
        }
    }
    if (rc == 0)
        t->count++;
    pthread_mutex_unlock(&sw->lock);
    if (rc != 0)
        np_entry_free(e);
    return rc;
}

/* Change the entry's action (and, when given, its counter and meter): 0, -1 not found or out of memory. */
NP_API int np_table_modify(np_switch *sw, int table, const u64 *key, const u64 *mask, int prefix_len,
                           int32_t priority, int kind, int action, u64 ref_id, const u64 *args, int nargs,
                           const u64 *counter, const np_meter_config *meter) {
    uint32_t index;
    int level;
    pthread_mutex_lock(&sw->lock);
    np_entry *e = np_table_find(&sw->tables[table], key, mask, prefix_len, priority, &index, &level);
    int rc = e ? np_ref_set(&e->ref, kind, action, ref_id, args, nargs) : -1;
    if (rc == 0 && counter) {
        e->bytes = counter[0];
        e->packets = counter[1];
    }
    if (rc == 0 && meter)
        np_meter_configure(&e->meter, meter, np_now(sw));
    pthread_mutex_unlock(&sw->lock);
    return rc;
}

NP_API int np_table_delete(np_switch *sw, int table, const u64 *key, const u64 *mask, int prefix_len,
                           int32_t priority) {
    np_table *t = &sw->tables[table];
    uint32_t index = 0;
    int level = -1;
    pthread_mutex_lock(&sw->lock);
    np_entry *e = np_table_find(t, key, mask, prefix_len, priority, &index, &level);
    if (e) {
        if (t->d->mode == NP_TABLE_EXACT) {
            np_hmap_remove(&t->exact, e);
        } else if (t->d->mode == NP_TABLE_LPM) {
            np_hmap_remove(&t->levels[level].map, e);
            if (!t->levels[level].map.count)
                np_lpm_drop_level(t, level);
        } else {
            memmove(&t->scan[index], &t->scan[index + 1], sizeof *t->scan * (t->nscan - index - 1));
            t->nscan--;
        }
        t->count--;
    }
    pthread_mutex_unlock(&sw->lock);
    if (e)
        np_entry_free(e);
    return e ? 0 : -1;
}

/* The direct counter of an entry: read into counter[2] (set is 0) or written from it (set is 1). */
NP_API int np_table_counter(np_switch *sw, int table, const u64 *key, const u64 *mask, int prefix_len,
                            int32_t priority, u64 *counter, int set) {
    uint32_t index;
    int level;
    pthread_mutex_lock(&sw->lock);
    np_entry *e = np_table_find(&sw->tables[table], key, mask, prefix_len, priority, &index, &level);
    if (e && set) {
        e->bytes = counter[0];
        e->packets = counter[1];
    } else if (e) {
        counter[0] = e->bytes;
        counter[1] = e->packets;
    }
    pthread_mutex_unlock(&sw->lock);
    return e ? 0 : -1;
}

NP_API int np_table_set_default(np_switch *sw, int table, int action, const u64 *args, int nargs) {
    pthread_mutex_lock(&sw->lock);
    int rc = np_ref_set(&sw->tables[table].def, NP_REF_ACTION, action, 0, args, nargs);
    pthread_mutex_unlock(&sw->lock);
    return rc;
}

/* -------------------------------------------------------------------------------- action profiles */

NP_API int np_member_set(np_switch *sw, int profile, u64 member_id, int action, const u64 *args, int nargs) {
    np_profile *p = &sw->profiles[profile];
    pthread_mutex_lock(&sw->lock);
    np_member *m = np_hmap_get(&p->members, &member_id);
    int rc = 0;
    if (!m) {
        m = calloc(1, sizeof *m);
        rc = m ? 0 : -1;
        if (m) {
            m->id = member_id;
            m->keyp = &m->id;
            rc = np_ref_set(&m->ref, NP_REF_ACTION, action, 0, args, nargs);
            if (rc == 0)
                rc = np_hmap_put(&p->members, m);
            if (rc != 0)
                np_member_free_v(m);
        }
    } else {
        rc = np_ref_set(&m->ref, NP_REF_ACTION, action, 0, args, nargs);
    }
    pthread_mutex_unlock(&sw->lock);
    return rc;
}

NP_API int np_member_delete(np_switch *sw, int profile, u64 member_id) {
    np_profile *p = &sw->profiles[profile];
    pthread_mutex_lock(&sw->lock);
    np_member *m = np_hmap_get(&p->members, &member_id);
    if (m)
        np_hmap_remove(&p->members, m);
    pthread_mutex_unlock(&sw->lock);
    if (m)
        np_member_free_v(m);
    return m ? 0 : -1;
}

/* Create or replace a group: member_ids already expanded by weight. */
NP_API int np_group_set(np_switch *sw, int profile, u64 group_id, const u64 *member_ids, uint32_t n) {
    np_profile *p = &sw->profiles[profile];
    np_group *g = calloc(1, sizeof *g);
    u64 *ids = malloc(sizeof(u64) * (n ? n : 1));
    if (!g || !ids) {
        free(g);
        free(ids);
        return -1;
    }
    memcpy(ids, member_ids, sizeof(u64) * n);
    g->id = group_id;
    g->keyp = &g->id;
    g->n = n;
    g->member_ids = ids;
    pthread_mutex_lock(&sw->lock);
    np_group *old = np_hmap_get(&p->groups, &group_id);
    if (old)
        np_hmap_remove(&p->groups, old);
    int rc = np_hmap_put(&p->groups, g);
    pthread_mutex_unlock(&sw->lock);
    if (old)
        np_group_free_v(old);
    if (rc != 0)
        np_group_free_v(g);
    return rc;
}

NP_API int np_group_delete(np_switch *sw, int profile, u64 group_id) {
    np_profile *p = &sw->profiles[profile];
    pthread_mutex_lock(&sw->lock);
    np_group *g = np_hmap_get(&p->groups, &group_id);
    if (g)
        np_hmap_remove(&p->groups, g);
    pthread_mutex_unlock(&sw->lock);
    if (g)
        np_group_free_v(g);
    return g ? 0 : -1;
}

/* ------------------------------------------------------------------ counters, meters, registers */

NP_API int np_counter_access(np_switch *sw, int counter, u64 index, u64 *cell, int set) {
    np_counter *c = &sw->counters[counter];
    if (index >= c->size)
        return -1;
    pthread_mutex_lock(&sw->lock);
    if (set) {
        c->cells[2 * index] = cell[0];
        c->cells[2 * index + 1] = cell[1];
    } else {
        cell[0] = c->cells[2 * index];
        cell[1] = c->cells[2 * index + 1];
    }
    pthread_mutex_unlock(&sw->lock);
    return 0;
}

NP_API int np_meter_set(np_switch *sw, int meter, u64 index, const np_meter_config *config) {
    np_meter_array *m = &sw->meters[meter];
    if (index >= m->size)
        return -1;
    pthread_mutex_lock(&sw->lock);
    np_meter_configure(&m->cells[index], config, np_now(sw));
    pthread_mutex_unlock(&sw->lock);
    return 0;
}

NP_API int np_table_meter_set(np_switch *sw, int table, const u64 *key, const u64 *mask, int prefix_len,
                              int32_t priority, const np_meter_config *config) {
    uint32_t index;
    int level;
    pthread_mutex_lock(&sw->lock);
    np_entry *e = np_table_find(&sw->tables[table], key, mask, prefix_len, priority, &index, &level);
    if (e)
        np_meter_configure(&e->meter, config, np_now(sw));
    pthread_mutex_unlock(&sw->lock);
    return e ? 0 : -1;
}

/* A register cell as (low, high) words, sign-extended for int<w> registers. */
NP_API int np_register_access(np_switch *sw, int reg, u64 index, u64 *words, int set) {
    np_register *r = &sw->registers[reg];
    if (index >= r->d->size)
        return -1;
    pthread_mutex_lock(&sw->lock);
    if (set) {
        r->cells[index] = np_register_wrap(r->d, ((u128)words[1] << 64) | words[0]);
    } else {
        words[0] = (u64)r->cells[index];
        words[1] = (u64)(r->cells[index] >> 64);
    }
    pthread_mutex_unlock(&sw->lock);
    return 0;
}

/* ---------------------------------------------------------------------------- parser value sets */

/* Replace a value set's members: `count` members of 2 * nfields words each (see np_value_set), a repeated
 * one kept once. 0, or -1 for more members than the set holds or out of memory (the old ones stay). */
NP_API int np_value_set_set(np_switch *sw, int index, const u64 *words, uint32_t count) {
    np_value_set *v = &sw->value_sets[index];
    size_t kw = 2 * (size_t)v->d->nfields;
    if (count > v->d->size)
        return -1;
    np_value_set fresh = {v->d, 0, malloc(sizeof(u64) * kw * (count ? count : 1)),
                          malloc(sizeof(np_vs_member) * (count ? count : 1)), {0}};
    int rc = fresh.words && fresh.members ? np_hmap_init(&fresh.map, (int)kw, offsetof(np_vs_member, key)) : -1;
    for (uint32_t i = 0; rc == 0 && i < count; i++) {
        const u64 *key = words + kw * i;
        if (np_hmap_get(&fresh.map, key))
            continue;
        np_vs_member *m = &fresh.members[fresh.count];
        m->key = fresh.words + kw * fresh.count;
        memcpy(m->key, key, sizeof(u64) * kw);
        rc = np_hmap_put(&fresh.map, m);
        fresh.count += rc == 0;
    }
    if (rc != 0) {
        np_value_set_free(&fresh);
        return -1;
    }
    pthread_mutex_lock(&sw->lock);
    np_value_set old = *v;
    *v = fresh;
    pthread_mutex_unlock(&sw->lock);
    np_value_set_free(&old);
    return 0;
}

/* Copy up to `cap` members (2 * nfields words each, in the order they were set) into `words`; returns how
 * many the set holds. */
NP_API uint32_t np_value_set_get(np_switch *sw, int index, u64 *words, uint32_t cap) {
    np_value_set *v = &sw->value_sets[index];
    pthread_mutex_lock(&sw->lock);
    uint32_t n = v->count;
    if (n && cap)
        memcpy(words, v->words, sizeof(u64) * 2 * (size_t)v->d->nfields * (n < cap ? n : cap));
    pthread_mutex_unlock(&sw->lock);
    return n;
}

/* ---------------------------------------------------------------- multicast groups, clone sessions */

static int np_replicas_set(np_switch *sw, np_hmap *map, u64 id, const uint32_t *ports, const uint32_t *rids,
                           uint32_t n, uint32_t truncate) {
    np_replicas *r = calloc(1, sizeof *r);
    np_replica *list = calloc(n ? n : 1, sizeof *list);
    if (!r || !list) {
        free(r);
        free(list);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++)
        list[i] = (np_replica){ports[i], rids[i]};
    r->id = id;
    r->keyp = &r->id;
    r->n = n;
    r->truncate = truncate;
    r->r = list;
    pthread_mutex_lock(&sw->lock);
    np_replicas *old = np_hmap_get(map, &id);
    if (old)
        np_hmap_remove(map, old);
    int rc = np_hmap_put(map, r);
    pthread_mutex_unlock(&sw->lock);
    if (old)
        np_replicas_free_v(old);
    if (rc != 0)
        np_replicas_free_v(r);
    return rc;
}

static int np_replicas_delete(np_switch *sw, np_hmap *map, u64 id) {
    pthread_mutex_lock(&sw->lock);
    np_replicas *r = np_hmap_get(map, &id);
    if (r)
        np_hmap_remove(map, r);
    pthread_mutex_unlock(&sw->lock);
    if (r)
        np_replicas_free_v(r);
    return r ? 0 : -1;
}

NP_API int np_mcast_set(np_switch *sw, u64 group, const uint32_t *ports, const uint32_t *rids, uint32_t n) {
    return np_replicas_set(sw, &sw->mcast, group, ports, rids, n, 0);
}

NP_API int np_mcast_delete(np_switch *sw, u64 group) { return np_replicas_delete(sw, &sw->mcast, group); }

NP_API int np_clone_set(np_switch *sw, u64 session, const uint32_t *ports, const uint32_t *rids, uint32_t n,
                        uint32_t truncate) {
    return np_replicas_set(sw, &sw->sessions, session, ports, rids, n, truncate);
}

NP_API int np_clone_delete(np_switch *sw, u64 session) { return np_replicas_delete(sw, &sw->sessions, session); }

#endif
