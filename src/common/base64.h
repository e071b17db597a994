/*
 * base64.h - RFC 4648 base64 (standard alphabet, padded), for bytes that
 * travel inside JSON: stdin given as base64, binary file contents over MCP.
 */
#ifndef NB_BASE64_H
#define NB_BASE64_H

#include <stddef.h>

#include "buf.h"

/* Append the encoding of data to out; NB_OK or NB_ETOOBIG (out's cap). */
int nb_base64_encode(struct nb_buf *out, const void *data, size_t len);

/*
 * Append the decoded bytes of text (whitespace ignored, padding optional)
 * to out. NB_OK, NB_ETOOBIG, or NB_ERR for a character outside the alphabet
 * or a dangling bit group.
 */
int nb_base64_decode(struct nb_buf *out, const char *text, size_t len);

#endif
