/*
 * dockerfile.h - a user's Dockerfile read as Docker's parser reads it, and
 * written again as the Dockerfile nanobox hands to Docker (templates.c).
 *
 * The file is split into logical lines exactly as Docker 20.10's parser
 * does (the escape directive, line continuations joined without a space,
 * comments and empty lines inside a continued line skipped), and each
 * instruction is checked. What is written is one instruction per line, no
 * comment, no directive but the escape character: so Docker reads the
 * instructions nanobox checked, and no parser difference between the two
 * can hide one.
 *
 * Refused (403): ONBUILD; the syntax directive (it would pick another
 * frontend; other directives but escape are dropped, as Docker's classic
 * builder ignores them); RUN with flags (--mount=from=,
 * --network: BuildKit's); an image named through a variable, quotes or
 * escapes; ADD of anything that could be a URL (':', '$', or an escape);
 * any image (FROM, COPY --from, ADD --from) the resolver does not allow.
 * Earlier stages (FROM x AS name, by name or index) stay allowed. 400 for
 * what Docker would refuse anyway (an unknown instruction, no FROM, a file
 * that ends inside a continued line) and for an instruction over 60000
 * bytes (written as one line, Docker's reader stops at 64 KiB).
 */
#ifndef NB_DOCKERFILE_H
#define NB_DOCKERFILE_H

#include <stddef.h>

#include "app.h"
#include "buf.h"

/*
 * May the Dockerfile name image (from_line: in a FROM, else a --from)? 1
 * allowed, with out the name to write instead ("" keeps it); 0 refused; -1
 * with ae set (Docker could not be asked).
 */
typedef int (*nb_dockerfile_resolve_fn)(void *arg, const char *image, int from_line, char *out,
                                        size_t outlen, struct nb_apierr *ae);

/*
 * Check df and write the Dockerfile Docker gets into out (the escape
 * directive first when the escape character is not '\'); *esc the escape
 * character. 0, or -1 with ae.
 */
int nb_dockerfile_rewrite(const char *df, size_t len, nb_dockerfile_resolve_fn resolve, void *arg,
                          struct nb_buf *out, char *esc, struct nb_apierr *ae);

#endif
