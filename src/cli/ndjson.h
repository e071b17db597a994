/*
 * ndjson.h - cut a streamed answer (NDJSON: one JSON value per line) into
 * lines as its bytes arrive in arbitrary pieces. A pure function over a
 * caller-owned buffer, so it can be fuzzed on its own
 * (tests/fuzz/fuzz_ndjson.c); client.c parses each line.
 */
#ifndef NB_CLI_NDJSON_H
#define NB_CLI_NDJSON_H

#include <stddef.h>

#include "buf.h"

#define NDJSON_OK 0
#define NDJSON_STOP -1     /* the callback asked to stop */
#define NDJSON_OVERFLOW -2 /* a line split across pieces passed pending's cap */

/* One complete line, without its '\n' (not NUL-terminated; may be empty).
 * Return 0 to go on, anything else to stop. */
typedef int (*ndjson_line_fn)(void *ctx, const char *line, size_t len);

/*
 * Feed a piece: every line it completes goes to fn, in order; the bytes
 * after the last '\n' wait in pending (whose cap bounds a line that spans
 * pieces) for the next piece, or for the caller at the end of the stream.
 */
int ndjson_feed(struct nb_buf *pending, const char *data, size_t len, ndjson_line_fn fn, void *ctx);

#endif
