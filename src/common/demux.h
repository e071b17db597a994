/*
 * demux.h - Docker's multiplexed attach/exec stream, parsed incrementally.
 *
 * The stream is frames of an 8-byte header [type, 0, 0, 0, len32 big-endian]
 * followed by len bytes of payload; type 1 is stdout, 2 stderr (0 stdin).
 * libcurl hands us arbitrary chunks, so a header can be split anywhere:
 * the parser is a small state machine that accepts any chunking and emits
 * payload bytes as they arrive (a frame's payload may come in pieces too).
 */
#ifndef NB_DEMUX_H
#define NB_DEMUX_H

#include <stddef.h>
#include <stdint.h>

enum nb_stream { NB_STREAM_STDIN = 0, NB_STREAM_STDOUT = 1, NB_STREAM_STDERR = 2 };

/* Called with payload bytes of one stream; return 0 to go on, -1 to stop. */
typedef int (*nb_demux_cb)(void *arg, enum nb_stream stream, const char *data, size_t len);

struct nb_demux {
    unsigned char hdr[8];  /* header bytes gathered so far */
    unsigned hdr_len;      /* 0..8 */
    uint32_t remaining;    /* payload bytes left in the current frame */
    enum nb_stream stream; /* stream of the current frame */
    int error;             /* sticky: bad frame type seen */
    nb_demux_cb cb;
    void *arg;
};

void nb_demux_init(struct nb_demux *d, nb_demux_cb cb, void *arg);

/*
 * Feed a chunk. Returns 0, or -1 if the stream is malformed (unknown frame
 * type or nonzero padding) or the callback asked to stop; after -1 every
 * further feed returns -1.
 */
int nb_demux_feed(struct nb_demux *d, const char *data, size_t len);

/* 1 if the stream ended on a frame boundary (no partial header/payload). */
int nb_demux_at_boundary(const struct nb_demux *d);

#endif
