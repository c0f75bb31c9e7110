/* The interface between p4switch's native packet I/O (np_io.c) and a pipeline: a compiled P4 program
 * (np_runtime.h + the generated source) or the bench's bare forwarder. Both sides are built from this
 * header, so a program's library and the I/O library agree on these layouts. */
#ifndef NP_ABI_H
#define NP_ABI_H

#include <stdint.h>

#define NP_MAX_FRAME 65536u

typedef struct np_emit np_emit;

/* Where a pipeline hands every frame it sends, in order; the data is only valid during the call. */
struct np_emit {
    void (*frame)(np_emit *self, uint32_t port, const uint8_t *data, uint32_t len);
};

/* A pipeline as the I/O thread drives it: process() is called with lock() held, for a burst of frames
 * at a time, so control-plane writes (which take the same lock) never see a half-processed packet. */
typedef struct np_pipeline {
    void *sw;
    void (*lock)(void *sw);
    void (*unlock)(void *sw);
    void (*process)(void *sw, uint32_t port, const uint8_t *frame, uint32_t len, np_emit *out);
} np_pipeline;

#endif
