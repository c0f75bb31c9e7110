/* The runtime of p4switch's native engine: what a compiled P4 program (the C source p4switch.engine.cgen
 * writes, which includes this file first and np_pipeline.h last) uses per packet, and the state the
 * control plane reads and writes through np_pipeline.h's API.
 *
 * It mirrors the Python engine piece by piece: values (p4switch/engine/codegen.py's arithmetic), tables
 * and action profiles (tables.py: exact tables in one hash map, exact+lpm tables in one hash map per
 * prefix length, every other table a priority-ordered scan), counters, trTCM meters, registers and hash
 * algorithms (externs.py), v1model's random() (Python's Mersenne Twister and randint, so both engines
 * draw the same numbers from the same state).
 *
 * Values: bit<w> is kept in a uint64_t (w <= 64) or unsigned __int128 (w <= 128) reduced modulo 2^w;
 * int<w> in int64_t / __int128, sign-extended. Table keys and action data are arrays of 64-bit words, a
 * field of more than 64 bits taking two (low word first). */
#ifndef NP_RUNTIME_H
#define NP_RUNTIME_H

#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "np_abi.h"
#include "np_queue.h"

typedef uint64_t u64;
typedef int64_t s64;
typedef unsigned __int128 u128;
typedef __int128 s128;

#define NP_DROP_PORT 511u
#define NP_MAX_CLONE_DEPTH 4
#define NP_PARSER_STEPS 100000 /* parser state transitions per packet before error.ParserTimeout */
#define NP_EVENT_BUDGET (16u << 20)

/* ------------------------------------------------------------------------------------------ values */

static inline u64 np_mask64(int w) { return w >= 64 ? ~(u64)0 : (((u64)1 << w) - 1); }
static inline u128 np_mask128(int w) { return w >= 128 ? ~(u128)0 : (((u128)1 << w) - 1); }
/* int<w> from the low w bits of x (two's complement) */
static inline s64 np_sext64(u64 x, int w) { return w >= 64 ? (s64)x : (s64)(x << (64 - w)) >> (64 - w); }
static inline s128 np_sext128(u128 x, int w) { return w >= 128 ? (s128)x : (s128)(x << (128 - w)) >> (128 - w); }

/* `a >> b` as Python shifts: logical for bit<w>, arithmetic for int<w>, any amount */
static inline u64 np_shr_u64(u64 a, u128 b) { return b >= 64 ? 0 : a >> (int)b; }
static inline s64 np_shr_s64(s64 a, u128 b) { return b >= 64 ? (a < 0 ? -1 : 0) : a >> (int)b; }
static inline u128 np_shr_u128(u128 a, u128 b) { return b >= 128 ? 0 : a >> (int)b; }
static inline s128 np_shr_s128(s128 a, u128 b) { return b >= 128 ? (a < 0 ? -1 : 0) : a >> (int)b; }

/* saturating `|+|` and `|-|` of w-bit values, computed in 128 bits */
static inline u128 np_sat_u(u128 a, u128 b, int sub, int w) {
    u128 r, hi = np_mask128(w);
    if (sub)
        return b > a ? 0 : a - b;
    if (__builtin_add_overflow(a, b, &r) || r > hi)
        return hi;
    return r;
}
static inline s128 np_sat_s(s128 a, s128 b, int sub, int w) {
    s128 r;
    s128 hi = (s128)(np_mask128(w - 1)), lo = -hi - 1;
    int over = sub ? __builtin_sub_overflow(a, b, &r) : __builtin_add_overflow(a, b, &r);
    if (over)
        return (sub ? a >= 0 : a > 0) ? hi : lo;
    return r > hi ? hi : (r < lo ? lo : r);
}

/* big-endian bit fields of packet bytes (the caller has checked the bytes exist) */
static inline u64 np_get_be64(const uint8_t *p, int nbytes) {
    u64 v = 0;
    for (int i = 0; i < nbytes; i++)
        v = (v << 8) | p[i];
    return v;
}
static inline u128 np_get_be128(const uint8_t *p, int nbytes) {
    u128 v = 0;
    for (int i = 0; i < nbytes; i++)
        v = (v << 8) | p[i];
    return v;
}
static inline void np_put_be64(uint8_t *p, int nbytes, u64 v) {
    for (int i = nbytes - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}
static inline void np_put_be128(uint8_t *p, int nbytes, u128 v) {
    for (int i = nbytes - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* The w bits of a bit string starting `bit` bits in (MSB first); a byte's worth at a time (it reads the
 * bytes that hold those bits, no others). */
static inline u128 np_get_bits(const uint8_t *buf, u64 bit, int w) {
    u128 v = 0;
    while (w > 0) {
        int room = 8 - (int)(bit & 7), n = w < room ? w : room;
        v = (v << n) | (u128)((buf[bit >> 3] >> (room - n)) & ((1u << n) - 1));
        bit += (u64)n;
        w -= n;
    }
    return v;
}

/* Append the w low bits of v to a zeroed bit string (MSB first, as BMv2 packs field lists), up to a byte
 * at a time: main.p4 hashes a 284-bit field list per frame, which bit by bit was most of its action time. */
static inline void np_put_bits(uint8_t *buf, u64 *bit, u128 v, int w) {
    while (w > 0) {
        int room = 8 - (int)(*bit & 7), n = w < room ? w : room;
        buf[*bit >> 3] |= (uint8_t)(((unsigned)(v >> (w - n)) & ((1u << n) - 1)) << (room - n));
        *bit += (u64)n;
        w -= n;
    }
}

/* ---------------------------------------------------------------------------------------- hashing */

enum { NP_CRC16 = 0, NP_CRC32 = 1, NP_CSUM16 = 2, NP_IDENTITY = 3, NP_XOR16 = 4 };

static uint16_t np_crc16_table[256];
static uint32_t np_crc32_table[256];
static pthread_once_t np_tables_once = PTHREAD_ONCE_INIT;

static void np_make_tables(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c16 = b, c32 = b;
        for (int i = 0; i < 8; i++) {
            c16 = (c16 & 1) ? (c16 >> 1) ^ 0xA001u : c16 >> 1;     /* CRC-16/ARC, BMv2's crc16 */
            c32 = (c32 & 1) ? (c32 >> 1) ^ 0xEDB88320u : c32 >> 1; /* zlib's CRC-32, BMv2's crc32 */
        }
        np_crc16_table[b] = (uint16_t)c16;
        np_crc32_table[b] = c32;
    }
}

/* The algorithm over the bytes of a followed by those of b (a checksum "with payload"). */
static u64 np_hash2(int algo, const uint8_t *a, u64 alen, const uint8_t *b, u64 blen) {
    u64 total = alen + blen;
    switch (algo) {
    case NP_CRC16: {
        uint32_t crc = 0;
        for (u64 i = 0; i < total; i++)
            crc = (crc >> 8) ^ np_crc16_table[(crc ^ (i < alen ? a[i] : b[i - alen])) & 0xFF];
        return crc;
    }
    case NP_CRC32: {
        uint32_t crc = 0xFFFFFFFFu;
        for (u64 i = 0; i < total; i++)
            crc = (crc >> 8) ^ np_crc32_table[(crc ^ (i < alen ? a[i] : b[i - alen])) & 0xFF];
        return crc ^ 0xFFFFFFFFu;
    }
    case NP_CSUM16: {
        u64 sum = 0;
        for (u64 i = 0; i < total; i++) {
            uint8_t byte = i < alen ? a[i] : b[i - alen];
            sum += (i & 1) ? byte : (u64)byte << 8; /* an odd last byte is padded with zero */
        }
        while (sum >> 16)
            sum = (sum & 0xFFFF) + (sum >> 16);
        return ~sum & 0xFFFF;
    }
    case NP_IDENTITY: {
        u64 v = 0;
        for (u64 i = 0; i < total && i < 8; i++)
            v = (v << 8) | (i < alen ? a[i] : b[i - alen]);
        return v;
    }
    default: { /* NP_XOR16 */
        u64 x = 0;
        for (u64 i = 0; i < total; i++) {
            uint8_t byte = i < alen ? a[i] : b[i - alen];
            x ^= (i & 1) ? byte : (u64)byte << 8;
        }
        return x;
    }
    }
}

/* --------------------------------------------------------------------- Python's random.randint */

typedef struct np_mt {
    uint32_t mt[624];
    int index;
} np_mt;

static uint32_t np_mt_next(np_mt *m) {
    if (m->index >= 624) {
        for (int i = 0; i < 624; i++) {
            uint32_t y = (m->mt[i] & 0x80000000u) | (m->mt[(i + 1) % 624] & 0x7FFFFFFFu);
            m->mt[i] = m->mt[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1) ? 0x9908B0DFu : 0);
        }
        m->index = 0;
    }
    uint32_t y = m->mt[m->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9D2C5680u;
    y ^= (y << 15) & 0xEFC60000u;
    y ^= y >> 18;
    return y;
}

/* random.getrandbits(k), 1 <= k <= 128: 32-bit words from the least significant up */
static u128 np_mt_bits(np_mt *m, int k) {
    if (k <= 32)
        return np_mt_next(m) >> (32 - k);
    u128 r = 0;
    for (int shift = 0; k > 0; k -= 32, shift += 32) {
        u128 w = np_mt_next(m);
        if (k < 32)
            w >>= 32 - k;
        r |= w << shift;
    }
    return r;
}

static int np_bit_length(u128 n) {
    u64 hi = (u64)(n >> 64), lo = (u64)n;
    return hi ? 128 - __builtin_clzll(hi) : (lo ? 64 - __builtin_clzll(lo) : 0);
}

/* random.randint(lo, hi) (lo when lo > hi, as the Python engine) for ranges below 2^128 */
static u128 np_randint(np_mt *m, u128 lo, u128 hi) {
    if (lo > hi || hi - lo == ~(u128)0)
        return lo; /* the whole 128-bit range is refused at compile time */
    u128 n = hi - lo + 1, r;
    int k = np_bit_length(n);
    do
        r = np_mt_bits(m, k);
    while (r >= n);
    return lo + r;
}

/* ------------------------------------------------------------------------------------- hash map */

/* Open addressing (linear probing, backward-shift deletion) over items that hold their key words:
 * an item is found by the words at `key_offset` bytes into it. A slot keeps the item's hash beside it, so
 * a probe reads one cache line before the item's (a frame's lookups mostly find cold caches: the
 * per-hop latency at low load is made of such misses). */
typedef struct np_slot {
    u64 hash;
    void *item;
} np_slot;

typedef struct np_hmap {
    np_slot *slots;
    uint32_t cap, count;
    int words;
    size_t key_offset;
} np_hmap;

static inline const u64 *np_item_key(const np_hmap *m, const void *item) {
    return *(const u64 *const *)((const char *)item + m->key_offset);
}

static inline u64 np_hash_words(const u64 *k, int n) {
    u64 h = 0x9E3779B97F4A7C15ull * (u64)(n + 1);
    for (int i = 0; i < n; i++) {
        h ^= k[i];
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 29);
}

static int np_hmap_init(np_hmap *m, int words, size_t key_offset) {
    m->cap = 16;
    m->count = 0;
    m->words = words;
    m->key_offset = key_offset;
    m->slots = calloc(m->cap, sizeof *m->slots);
    return m->slots ? 0 : -1;
}

static void np_hmap_free(np_hmap *m) {
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}

static void *np_hmap_get(const np_hmap *m, const u64 *key) {
    if (!m->count)
        return NULL;
    u64 h = np_hash_words(key, m->words);
    uint32_t mask = m->cap - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        const np_slot *s = &m->slots[i];
        if (!s->item)
            return NULL;
        if (s->hash == h && !memcmp(np_item_key(m, s->item), key, (size_t)m->words * 8))
            return s->item;
    }
}

static int np_hmap_put(np_hmap *m, void *item);

static int np_hmap_grow(np_hmap *m) {
    np_hmap bigger = *m;
    bigger.cap = m->cap * 2;
    bigger.count = 0;
    bigger.slots = calloc(bigger.cap, sizeof *bigger.slots);
    if (!bigger.slots)
        return -1;
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->slots[i].item)
            np_hmap_put(&bigger, m->slots[i].item);
    np_hmap_free(m);
    *m = bigger;
    return 0;
}

/* Insert (the caller has checked the key is absent); -1 when out of memory. */
static int np_hmap_put(np_hmap *m, void *item) {
    if ((m->count + 1) * 2 > m->cap && np_hmap_grow(m) < 0)
        return -1;
    u64 h = np_hash_words(np_item_key(m, item), m->words);
    uint32_t mask = m->cap - 1, i = (uint32_t)h & mask;
    while (m->slots[i].item)
        i = (i + 1) & mask;
    m->slots[i] = (np_slot){h, item};
    m->count++;
    return 0;
}

static void np_hmap_remove(np_hmap *m, const void *item) {
    uint32_t mask = m->cap - 1;
    u64 h = np_hash_words(np_item_key(m, item), m->words);
    uint32_t i = (uint32_t)h & mask;
    while (m->slots[i].item != item) {
        if (!m->slots[i].item)
            return;
        i = (i + 1) & mask;
    }
    /* backward shift: move later items of the run into the hole when their home allows it */
    uint32_t hole = i;
    for (uint32_t j = (i + 1) & mask; m->slots[j].item; j = (j + 1) & mask) {
        uint32_t home = (uint32_t)m->slots[j].hash & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole] = (np_slot){0, NULL};
    m->count--;
}

/* --------------------------------------------------------------------------------------- meters */

typedef struct np_meter_config {
    int set;
    u64 cir, cburst, pir, pburst;
} np_meter_config;

/* One two-rate three-colour marker cell (RFC 2698, colour-blind), as externs.Meter. */
typedef struct np_meter {
    np_meter_config config;
    double c_tokens, p_tokens, last;
} np_meter;

enum { NP_GREEN = 0, NP_YELLOW = 1, NP_RED = 2 };

static void np_meter_configure(np_meter *m, const np_meter_config *config, double now) {
    m->config = *config;
    if (config->set) {
        m->c_tokens = (double)config->cburst;
        m->p_tokens = (double)config->pburst;
        m->last = now;
    }
}

static int np_meter_execute(np_meter *m, u64 amount, double now) {
    if (!m->config.set)
        return NP_GREEN;
    double elapsed = now - m->last;
    if (elapsed < 0.0)
        elapsed = 0.0;
    m->last = now;
    double p = m->p_tokens + elapsed * (double)m->config.pir;
    double c = m->c_tokens + elapsed * (double)m->config.cir;
    m->p_tokens = (double)m->config.pburst <= p ? (double)m->config.pburst : p;
    m->c_tokens = (double)m->config.cburst <= c ? (double)m->config.cburst : c;
    if (m->p_tokens < (double)amount)
        return NP_RED;
    m->p_tokens -= (double)amount;
    if (m->c_tokens < (double)amount)
        return NP_YELLOW;
    m->c_tokens -= (double)amount;
    return NP_GREEN;
}

/* ----------------------------------------------------------------------------- program description */

enum { NP_KEY_EXACT = 0, NP_KEY_TERNARY = 1, NP_KEY_LPM = 2, NP_KEY_RANGE = 3, NP_KEY_OPTIONAL = 4 };
enum { NP_TABLE_EXACT = 0, NP_TABLE_LPM = 1, NP_TABLE_SCAN = 2, NP_TABLE_KEYLESS = 3 };
enum { NP_REF_ACTION = 0, NP_REF_MEMBER = 1, NP_REF_GROUP = 2 };

typedef struct np_key_desc {
    int kind, width, word, words;
} np_key_desc;

typedef struct np_table_desc {
    const char *name;
    int mode, nkeys, kw; /* kw: key words */
    const np_key_desc *keys;
    int lpm_key;          /* index of the lpm key (NP_TABLE_LPM) */
    int profile;          /* action profile index, -1 none */
    int direct_meter_bytes; /* -1 no direct meter, 0 packets, 1 bytes */
} np_table_desc;

typedef struct np_register_desc {
    const char *name;
    u64 size;
    int width, is_signed;
} np_register_desc;

typedef struct np_profile_desc {
    const char *name;
    int algorithm; /* -1: an action profile (no groups); the whole hash picks, as BMv2 (no outputWidth) */
} np_profile_desc;

/* ---------------------------------------------------------------------------------------- tables */

typedef struct np_action_ref {
    int32_t action;  /* program action index (NP_REF_ACTION) */
    int kind;        /* NP_REF_* */
    u64 ref_id;      /* member or group id */
    int nargs;
    u64 *args;
} np_action_ref;

typedef struct np_entry {
    u64 *key;   /* kw words: the value (exact, lpm: already cut to the prefix; scan: value or range low) */
    u64 *mask;  /* kw words (scan: mask, or the range high for range keys) */
    int32_t priority;
    u64 seq;
    np_action_ref ref;
    u64 bytes, packets; /* direct counter */
    np_meter meter;     /* direct meter */
} np_entry;

typedef struct np_lpm_level {
    int prefix_len;
    u64 *mask; /* kw words: ones but beyond the prefix in the lpm key */
    np_hmap map;
} np_lpm_level;

typedef struct np_table {
    const np_table_desc *d;
    np_hmap exact;           /* NP_TABLE_EXACT */
    np_lpm_level *levels;    /* NP_TABLE_LPM, longest prefix first */
    int nlevels;
    np_entry **scan;         /* NP_TABLE_SCAN: by priority (higher first), then age */
    uint32_t nscan, cap_scan;
    np_action_ref def;
    u64 count;
} np_table;

typedef struct np_member {
    u64 id;
    u64 *keyp;
    np_action_ref ref;
} np_member;

typedef struct np_group {
    u64 id;
    u64 *keyp;
    uint32_t n;
    u64 *member_ids; /* expanded by weight, in order */
} np_group;

typedef struct np_profile {
    const np_profile_desc *d;
    np_hmap members, groups;
} np_profile;

typedef struct np_replica {
    uint32_t port, rid;
} np_replica;

typedef struct np_replicas {
    u64 id;
    u64 *keyp;
    uint32_t n;
    uint32_t truncate;
    np_replica *r;
} np_replicas;

typedef struct np_counter {
    u64 size;
    u64 *cells; /* [bytes, packets] per index */
} np_counter;

typedef struct np_meter_array {
    u64 size;
    int bytes;
    np_meter *cells;
} np_meter_array;

typedef struct np_register {
    const np_register_desc *d;
    u128 *cells;
} np_register;

/* A parser value set: its members (each field as two words, low first: the value as the select key holds
 * it, so a key outside the field's width or a negative int<w> key matches no member, as in the Python
 * engine) in a hash map over the words of one member. */
typedef struct np_value_set_desc {
    const char *name;
    u64 size;
    int nfields;
    const int *widths;
} np_value_set_desc;

typedef struct np_vs_member {
    u64 *key; /* 2 * nfields words of the set's `words` */
} np_vs_member;

typedef struct np_value_set {
    const np_value_set_desc *d;
    uint32_t count;
    u64 *words;            /* count members of 2 * nfields words, in the order they were set */
    np_vs_member *members; /* one per member */
    np_hmap map;
} np_value_set;

#endif
