/* Fuzz driver of the native engine, built with AddressSanitizer and UndefinedBehaviorSanitizer into one
 * executable with a compiled program (p4switch/native/fuzz.py appends `#include "np_fuzz.c"` to the
 * generated source). It fills every table, action profile, parser value set, multicast group, clone
 * session and meter at random, runs mutated frames through the whole pipeline while it keeps changing
 * entries, frees everything and exits 0; any out-of-bounds access, undefined behaviour or leak
 * (LeakSanitizer at exit) aborts it with the sanitizer's report.
 *
 *     fuzz SEEDS FRAMES RANDOM_SEED
 *
 * SEEDS holds the valid frames mutations start from, each as a 4-byte little-endian length and the
 * bytes. Table keys and value set members come from a pool of the values found in them (every big-endian
 * window of every seed frame) and small numbers, so that entries match the frames and the actions run.
 * Prints one line: `frames N outputs M parser_errors P`. */
#include <stdio.h>

static u64 fz_state;

static u64 fz_next(void) { /* xorshift64* */
    fz_state ^= fz_state >> 12;
    fz_state ^= fz_state << 25;
    fz_state ^= fz_state >> 27;
    return fz_state * 0x2545F4914F6CDD1Dull;
}

static u64 fz_below(u64 n) { return n ? fz_next() % n : 0; }

typedef struct fz_seeds {
    uint8_t **frames;
    uint32_t *lens;
    uint32_t n;
    u64 *pool;  /* big-endian windows of 1, 2, 4, 6 and 8 bytes of the seed frames, small numbers */
    uint32_t npool;
    u128 *wide; /* 16-byte windows */
    uint32_t nwide;
} fz_seeds;

static int fz_read_seeds(const char *path, fz_seeds *s) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    uint32_t len;
    while (fread(&len, 4, 1, f) == 1 && len <= NP_MAX_FRAME) {
        uint8_t *frame = malloc(len ? len : 1);
        if (!frame || fread(frame, 1, len, f) != len) {
            free(frame);
            break;
        }
        s->frames = realloc(s->frames, sizeof *s->frames * (s->n + 1));
        s->lens = realloc(s->lens, sizeof *s->lens * (s->n + 1));
        s->frames[s->n] = frame;
        s->lens[s->n++] = len;
    }
    fclose(f);
    uint32_t cap = 64;
    for (uint32_t i = 0; i < s->n; i++)
        cap += s->lens[i] * 5;
    s->pool = malloc(sizeof *s->pool * cap);
    s->wide = malloc(sizeof *s->wide * cap);
    for (u64 v = 0; v < 64; v++)
        s->pool[s->npool++] = v;
    static const int sizes[] = {1, 2, 4, 6, 8};
    for (uint32_t i = 0; i < s->n; i++)
        for (uint32_t at = 0; at < s->lens[i]; at++) {
            for (int k = 0; k < 5; k++)
                if (at + (uint32_t)sizes[k] <= s->lens[i])
                    s->pool[s->npool++] = np_get_be64(s->frames[i] + at, sizes[k]);
            if (at + 16 <= s->lens[i])
                s->wide[s->nwide++] = np_get_be128(s->frames[i] + at, 16);
        }
    return s->n ? 0 : -1;
}

/* a key value of `width` bits: low word and, for wide keys, high word */
static u128 fz_value(const fz_seeds *s, int width) {
    u128 v;
    uint32_t which = (uint32_t)fz_below(s->n), nbytes = (uint32_t)(width + 7) / 8;
    uint32_t at = (uint32_t)fz_below(1 + fz_below(64)); /* header fields sit near the start */
    if (fz_below(2) && at + nbytes <= s->lens[which]) /* a header field's bytes, most likely */
        return np_get_be128(s->frames[which] + at, (int)nbytes) >> (nbytes * 8 - (uint32_t)width);
    if (width > 64 && s->nwide && fz_below(4))
        v = s->wide[fz_below(s->nwide)];
    else
        v = fz_below(4) ? s->pool[fz_below(s->npool)] : ((u128)fz_next() << 64) | fz_next();
    return v & np_mask128(width);
}

/* a random (valid) action for a table: its id and data words */
static int fz_action(const int *actions, int nactions, u64 *args, int *nargs) {
    if (!nactions)
        return -1;
    int action = actions[fz_below((u64)nactions)];
    *nargs = np_gen_action_words[action];
    for (int i = 0; i < *nargs; i++)
        args[i] = fz_below(2) ? fz_below(16) : fz_next();
    return action;
}

static void fz_entry(np_switch *sw, int t, const fz_seeds *s, u64 seq) {
    const np_table_desc *d = &np_gen_tables[t];
    u64 key[64] = {0}, mask[64] = {0}, args[64];
    int plen = 0, nargs = 0;
    if (d->kw > 64)
        return;
    for (int f = 0; f < d->nkeys; f++) {
        const np_key_desc *k = &d->keys[f];
        u64 full = np_mask64(k->width < 64 ? k->width : 64);
        u128 wide = fz_value(s, k->width);
        u64 v = (u64)wide, m = full;
        if (k->kind == NP_KEY_TERNARY || k->kind == NP_KEY_OPTIONAL)
            m = fz_below(3) ? full : (fz_below(2) ? 0 : fz_next() & full);
        if (k->kind == NP_KEY_LPM) {
            plen = (int)fz_below((u64)k->width + 1);
            u128 pm = plen ? np_mask128(plen) << (k->width - plen) : 0;
            m = (u64)pm;
            if (k->words == 2)
                mask[k->word + 1] = (u64)(pm >> 64);
        }
        if (k->kind == NP_KEY_RANGE) { /* key holds the low end, mask the high end */
            u64 lo = v, hi = v + fz_below(1000);
            if (hi < lo || hi > full)
                hi = full;
            key[k->word] = lo;
            mask[k->word] = hi;
            if (k->words == 2)
                mask[k->word + 1] = fz_below(2) ? ~(u64)0 : 0;
            continue;
        }
        key[k->word] = v & m;
        mask[k->word] = m;
        if (k->words == 2) {
            if (k->kind != NP_KEY_LPM)
                mask[k->word + 1] = (u64)(np_mask128(k->width) >> 64);
            key[k->word + 1] = (u64)(wide >> 64) & mask[k->word + 1];
        }
    }
    int kind = NP_REF_ACTION, action = fz_action(np_gen_table_actions[t], np_gen_table_action_counts[t], args, &nargs);
    u64 ref = 0;
    if (d->profile >= 0) {
        kind = fz_below(2) ? NP_REF_MEMBER : NP_REF_GROUP;
        ref = fz_below(8);
        action = -1;
        nargs = 0;
    }
    np_meter_config meter = {(int)fz_below(2), fz_below(1000), fz_below(1000), 1000 + fz_below(1000),
                             1000 + fz_below(1000)};
    int32_t priority = d->mode == NP_TABLE_SCAN ? 1 + (int32_t)fz_below(8) : 0;
    /* a duplicate key is the control plane's to refuse; here the old entry goes first */
    np_table_delete(sw, t, key, mask, plen, priority);
    np_table_insert(sw, t, key, mask, plen, priority, seq, kind, action, ref, args, nargs, 0, 0, &meter);
}

static void fz_profile(np_switch *sw, int p) {
    int actions[512], n = 0;
    for (int t = 0; t < NP_NTABLES && n < 448; t++)
        if (np_gen_tables[t].profile == p)
            for (int i = 0; i < np_gen_table_action_counts[t] && n < 512; i++)
                actions[n++] = np_gen_table_actions[t][i];
    u64 args[64];
    int nargs = 0;
    for (u64 m = 0; m < 8; m++) {
        if (fz_below(4) == 0) {
            np_member_delete(sw, p, m);
            continue;
        }
        int action = fz_action(actions, n, args, &nargs);
        if (action >= 0)
            np_member_set(sw, p, m, action, args, nargs);
    }
    for (u64 g = 0; g < 8; g++) {
        u64 ids[16];
        uint32_t count = (uint32_t)fz_below(17);
        for (uint32_t i = 0; i < count; i++)
            ids[i] = fz_below(10); /* members 8 and 9 never exist: resolved to no action */
        np_group_set(sw, p, g, ids, count);
    }
}

static void fz_replication(np_switch *sw) {
    uint32_t ports[8], rids[8];
    for (u64 id = 0; id < 4; id++) {
        uint32_t n = (uint32_t)fz_below(9);
        for (uint32_t i = 0; i < n; i++) {
            ports[i] = (uint32_t)fz_below(12);
            rids[i] = (uint32_t)fz_below(4);
        }
        np_mcast_set(sw, id, ports, rids, n);
        np_clone_set(sw, id, ports, rids, n, (uint32_t)(fz_below(2) ? fz_below(80) : 0));
    }
}

/* every parser value set: up to its size (at most 64) members of values like table keys, some repeated */
static void fz_value_sets(np_switch *sw, const fz_seeds *s) {
    for (int v = 0; v < NP_NVALUE_SETS; v++) {
        const np_value_set_desc *d = &np_gen_value_sets[v];
        uint32_t kw = 2 * (uint32_t)d->nfields, count = (uint32_t)fz_below((d->size < 64 ? d->size : 64) + 1);
        u64 *words = malloc(sizeof(u64) * kw * (count ? count : 1));
        if (!words)
            return;
        for (uint32_t m = 0; m < count; m++) {
            u64 *member = words + kw * m;
            if (m && fz_below(8) == 0) {
                memcpy(member, member - kw, sizeof(u64) * kw);
                continue;
            }
            for (int f = 0; f < d->nfields; f++) {
                u128 value = fz_value(s, d->widths[f]);
                member[2 * f] = (u64)value;
                member[2 * f + 1] = (u64)(value >> 64);
            }
        }
        np_value_set_set(sw, v, words, count);
        free(words);
    }
}

static void fz_program(np_switch *sw, const fz_seeds *s, u64 *seq) {
    for (int t = 0; t < NP_NTABLES; t++) {
        u64 args[64];
        int nargs = 0;
        int action = fz_action(np_gen_table_actions[t], np_gen_table_action_counts[t], args, &nargs);
        if (action >= 0)
            np_table_set_default(sw, t, action, args, nargs);
        for (int i = 0; i < 64; i++)
            fz_entry(sw, t, s, ++*seq);
    }
    for (int p = 0; p < NP_NPROFILES; p++)
        fz_profile(sw, p);
    for (int m = 0; m < NP_NMETERS; m++) {
        np_meter_config c = {1, fz_below(100), fz_below(100), 100 + fz_below(100), 100 + fz_below(100)};
        for (u64 i = 0; i < np_gen_meter_sizes[m] && i < 16; i++)
            np_meter_set(sw, m, i, &c);
    }
    fz_value_sets(sw, s);
    fz_replication(sw);
}

static uint32_t fz_mutate(const fz_seeds *s, uint8_t *out, u64 i) {
    uint32_t which = (uint32_t)fz_below(s->n), len = s->lens[which];
    const uint8_t *base = s->frames[which];
    switch (i % 6) {
    case 0: /* garbage */
        len = (uint32_t)fz_below(161);
        for (uint32_t j = 0; j < len; j++)
            out[j] = (uint8_t)fz_next();
        return len;
    case 1: /* truncated */
        len = (uint32_t)fz_below((u64)len + 1);
        memcpy(out, base, len);
        return len;
    case 2: /* bit flips */
        memcpy(out, base, len);
        for (u64 k = 1 + fz_below(8); len && k; k--)
            out[fz_below(len)] ^= (uint8_t)(1u << fz_below(8));
        return len;
    case 3: { /* four bytes overwritten, then truncated */
        memcpy(out, base, len);
        if (len) {
            uint32_t at = (uint32_t)fz_below(len);
            for (uint32_t j = at; j < at + 4 && j < len; j++)
                out[j] = (uint8_t)fz_next();
            len = 1 + (uint32_t)fz_below(len);
        }
        return len;
    }
    case 4: { /* extended */
        uint32_t extra = (uint32_t)fz_below(65);
        memcpy(out, base, len);
        for (uint32_t j = 0; j < extra; j++)
            out[len + j] = (uint8_t)fz_next();
        return len + extra;
    }
    default: { /* a jumbo frame */
        uint32_t big = 1500 + (uint32_t)fz_below(8000);
        memcpy(out, base, len);
        for (uint32_t j = len; j < big; j++)
            out[j] = (uint8_t)j;
        return big;
    }
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s SEEDS FRAMES RANDOM_SEED\n", argv[0]);
        return 2;
    }
    fz_seeds seeds = {0};
    if (fz_read_seeds(argv[1], &seeds) < 0) {
        fprintf(stderr, "no seed frames in %s\n", argv[1]);
        return 2;
    }
    u64 frames = strtoull(argv[2], NULL, 10);
    fz_state = strtoull(argv[3], NULL, 10) * 2654435761u + 1;
    uint32_t mt[625];
    for (int i = 0; i < 624; i++)
        mt[i] = (uint32_t)fz_next();
    mt[624] = 624;
    np_switch *sw = np_switch_new(1000.0, 1, mt);
    if (!sw)
        return 3;
    u64 seq = 0, outputs = 0;
    fz_program(sw, &seeds, &seq);
    uint8_t *frame = malloc(NP_MAX_FRAME);
    for (u64 i = 0; i < frames; i++) {
        if (i % 1000 == 999)
            fz_program(sw, &seeds, &seq); /* entries replaced while packets run, as a controller does */
        if (i % 97 == 0)
            np_set_clock(sw, 1000.0 + (double)i * 1e-4);
        uint32_t len = fz_mutate(&seeds, frame, i);
        outputs += np_process_frame(sw, (uint32_t)fz_below(10), frame, len);
        np_event ev;
        uint8_t buf[4096];
        while (np_switch_next_event(sw, &ev, buf, sizeof buf))
            ;
    }
    u64 stats[NP_STAT_PARSER_ERROR + NP_NERRORS];
    np_stats(sw, stats);
    u64 parser_errors = 0;
    for (int e = 0; e < NP_NERRORS; e++)
        parser_errors += stats[NP_STAT_PARSER_ERROR + e];
    printf("frames %llu outputs %llu parser_errors %llu internal_errors %llu passes %llu\n",
           (unsigned long long)stats[NP_STAT_RX], (unsigned long long)outputs, (unsigned long long)parser_errors,
           (unsigned long long)stats[NP_STAT_INTERNAL_ERROR],
           (unsigned long long)(stats[NP_STAT_RESUBMIT] + stats[NP_STAT_RECIRCULATE]));
    np_switch_free(sw);
    free(frame);
    for (uint32_t i = 0; i < seeds.n; i++)
        free(seeds.frames[i]);
    free(seeds.frames);
    free(seeds.lens);
    free(seeds.pool);
    free(seeds.wide);
    return 0;
}
