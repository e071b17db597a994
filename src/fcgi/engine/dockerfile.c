/*
 * dockerfile.c - see dockerfile.h.
 *
 * The reading follows Docker 20.10's parser (buildkit's
 * frontend/dockerfile/parser: Parse, trimContinuationCharacter,
 * splitCommand, extractBuilderFlags) and its instructions (FROM's one or
 * three words, a stage name's pattern, --from by index or by name).
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dockerfile.h"

#define STAGES_MAX 64
#define STAGE_LEN 64
#define WORD_MAX 1024
#define FLAGS_MAX 16
#define LINE_MAX_OUT 60000 /* an instruction written on one line (Docker's scanner: 64 KiB) */

struct df_state {
    nb_dockerfile_resolve_fn resolve;
    void *arg;
    struct nb_buf *out;
    char esc;
    char stages[STAGES_MAX][STAGE_LEN];
    unsigned n_stages, n_from;
};

/* Blanks of Docker's tokenWhitespace ([\t\v\f\r ]) */
static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r';
}

/* unicode.IsSpace of a byte taken as a rune, as extractBuilderFlags does */
static int go_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || c == 0x85 || c == 0xa0;
}

/* The characters an image reference may have here: no variable, quote or escape. */
static int image_chars_ok(const char *s)
{
    if (*s == '\0')
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("._:/@-", *s))
            return 0;
    return 1;
}

static void lower(const char *in, char *out, size_t outlen)
{
    size_t i;
    for (i = 0; in[i] && i + 1 < outlen; i++)
        out[i] = (char)tolower((unsigned char)in[i]);
    out[i] = '\0';
}

static int is_stage(const struct df_state *st, const char *name)
{
    char low[STAGE_LEN];
    if (strlen(name) >= STAGE_LEN)
        return 0;
    lower(name, low, sizeof(low));
    for (unsigned k = 0; k < st->n_stages; k++)
        if (!strcmp(st->stages[k], low))
            return 1;
    return 0;
}

/*
 * extractBuilderFlags: the leading --flags of s (quotes and '\' unquoted)
 * into words; the rest (from the first word that is no flag) into *rest.
 * *dashdash is 1 when a lone "--" ended the flags.
 */
static int split_flags(const char *s, char words[][WORD_MAX], unsigned *n_words, const char **rest,
                       int *dashdash)
{
    enum { IN_SPACES, IN_WORD, IN_QUOTE } phase = IN_SPACES;
    size_t len = strlen(s), wl = 0;
    char word[WORD_MAX], quote = 0;
    int blank_ok = 0;
    unsigned char ch = 0;

    *n_words = 0;
    *dashdash = 0;
    *rest = s + len;
    for (size_t pos = 0; pos <= len; pos++) {
        if (pos != len)
            ch = (unsigned char)s[pos];
        if (phase == IN_SPACES) {
            if (pos == len)
                break;
            if (go_space(ch))
                continue;
            if (ch != '-' || pos + 1 == len || s[pos + 1] != '-') {
                *rest = s + pos;
                return 0;
            }
            phase = IN_WORD;
        }
        if (pos == len) { /* in a word or a quote */
            word[wl] = '\0';
            if (strcmp(word, "--") != 0 && (blank_ok || wl > 0)) {
                if (*n_words == FLAGS_MAX)
                    return -1;
                memcpy(words[(*n_words)++], word, wl + 1);
            }
            break;
        }
        if (phase == IN_WORD) {
            if (go_space(ch)) {
                phase = IN_SPACES;
                word[wl] = '\0';
                if (!strcmp(word, "--")) {
                    *rest = s + pos;
                    *dashdash = 1;
                    return 0;
                }
                if (blank_ok || wl > 0) {
                    if (*n_words == FLAGS_MAX)
                        return -1;
                    memcpy(words[(*n_words)++], word, wl + 1);
                }
                wl = 0;
                blank_ok = 0;
                continue;
            }
            if (ch == '\'' || ch == '"') {
                quote = (char)ch;
                blank_ok = 1;
                phase = IN_QUOTE;
                continue;
            }
        } else if (ch == (unsigned char)quote) { /* IN_QUOTE */
            phase = IN_WORD;
            continue;
        }
        if (ch == '\\') {
            if (pos + 1 == len) {
                if (phase == IN_QUOTE)
                    phase = IN_WORD;
                continue;
            }
            ch = (unsigned char)s[++pos];
        }
        if (wl + 1 >= WORD_MAX)
            return -1;
        word[wl++] = (char)ch;
    }
    return 0;
}

/* A flag as Docker's flag reader gets it back: --"name=value", quoted. */
static void put_flag(struct nb_buf *b, const char *word)
{
    nb_buf_append(b, " --\"", 4);
    for (const char *p = word + 2; *p; p++) {
        if (*p == '\\' || *p == '"')
            nb_buf_append(b, "\\", 1);
        nb_buf_append(b, p, 1);
    }
    nb_buf_append(b, "\"", 1);
}

/* The flag's name (between "--" and '=') is name? Its value into *val. */
static int flag_is(const char *word, const char *name, const char **val)
{
    size_t n = strlen(name);
    if (strncasecmp(word + 2, name, n) != 0 || (word[2 + n] != '=' && word[2 + n] != '\0'))
        return 0;
    *val = word[2 + n] == '=' ? word + 3 + n : "";
    return 1;
}

/* An image named by a FROM or a --from: allowed as is, rewritten into out, or refused. */
static int check_image(struct df_state *st, const char *what, const char *image, int from_line,
                       char *out, size_t outlen, struct nb_apierr *ae)
{
    int r;
    out[0] = '\0';
    if (strchr(image, '$')) {
        nb_apierr_set(ae, NB_E_FORBIDDEN, "from_forbidden",
                      "%s%.200s names its image through a variable (ARG or ENV): not allowed, "
                      "name the image itself",
                      what, image);
        return -1;
    }
    if (!image_chars_ok(image)) {
        nb_apierr_set(ae, NB_E_FORBIDDEN, "from_forbidden",
                      "%s%.200s: an image is named with letters, digits and . _ : / @ - only "
                      "(no quotes or escapes)",
                      what, image);
        return -1;
    }
    if (!from_line && strspn(image, "0123456789") == strlen(image))
        return 0; /* an earlier stage by its index: never an image */
    if (is_stage(st, image))
        return 0;
    r = st->resolve(st->arg, image, from_line, out, outlen, ae);
    if (r < 0)
        return -1;
    if (r == 0) {
        nb_apierr_set(ae, NB_E_FORBIDDEN, "from_forbidden",
                      "%s%.200s: not an image this key may build from (the operator's images, "
                      "its own ready templates and snapshots by name, or an earlier stage)",
                      what, image);
        return -1;
    }
    return 0;
}

static int do_from(struct df_state *st, const char *rest, struct nb_apierr *ae)
{
    char flags[FLAGS_MAX][WORD_MAX], tok[3][WORD_MAX], repl[256];
    unsigned nf, nt = 0;
    const char *args, *p, *v;
    int dd;

    if (split_flags(rest, flags, &nf, &args, &dd) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile", "a FROM line's flags are too long");
        return -1;
    }
    for (unsigned i = 0; i < nf; i++)
        if (!flag_is(flags[i], "platform", &v)) {
            nb_apierr_set(ae, NB_E_FORBIDDEN, "dockerfile_forbidden",
                          "FROM %.100s: only --platform is allowed", flags[i]);
            return -1;
        }
    for (p = args;;) {
        size_t n;
        while (blank(*p))
            p++;
        if (*p == '\0')
            break;
        for (n = 0; p[n] && !blank(p[n]); n++)
            ;
        if (nt == 3 || n >= WORD_MAX) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile",
                          "FROM takes an image, or an image, AS and a stage name");
            return -1;
        }
        snprintf(tok[nt++], WORD_MAX, "%.*s", (int)n, p);
        p += n;
    }
    if (!(nt == 1 || (nt == 3 && !strcasecmp(tok[1], "as")))) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile",
                      nt == 0 ? "a FROM line names no image"
                              : "FROM takes an image, or an image, AS and a stage name");
        return -1;
    }
    st->n_from++;
    if (check_image(st, "FROM ", tok[0], 1, repl, sizeof(repl), ae) != 0)
        return -1;
    nb_buf_printf(st->out, "FROM");
    for (unsigned i = 0; i < nf; i++)
        put_flag(st->out, flags[i]);
    nb_buf_printf(st->out, " %s", repl[0] ? repl : tok[0]);
    if (nt == 3) {
        char low[STAGE_LEN];
        size_t n = strlen(tok[2]);
        lower(tok[2], low, sizeof(low));
        if (n >= STAGE_LEN || !islower((unsigned char)low[0]) ||
            strspn(low, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != n) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile",
                          "invalid name for a build stage: \"%.80s\"", tok[2]);
            return -1;
        }
        if (st->n_stages == STAGES_MAX) {
            nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile", "more than %d build stages",
                          STAGES_MAX);
            return -1;
        }
        memcpy(st->stages[st->n_stages++], low, n + 1);
        nb_buf_printf(st->out, " AS %s", low);
    }
    nb_buf_append(st->out, "\n", 1);
    return 0;
}

/* COPY and ADD: --from checked (and rewritten), ADD's sources never a URL. */
static int do_copy(struct df_state *st, const char *cmd, const char *rest, struct nb_apierr *ae)
{
    char flags[FLAGS_MAX][WORD_MAX], repl[256], what[16];
    const char *args, *v;
    unsigned nf;
    int dd, add = !strcasecmp(cmd, "add");
    size_t al;

    if (split_flags(rest, flags, &nf, &args, &dd) != 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile", "%s: its flags are too long", cmd);
        return -1;
    }
    snprintf(what, sizeof(what), "%s --from=", add ? "ADD" : "COPY");
    nb_buf_printf(st->out, "%s", add ? "ADD" : "COPY");
    for (unsigned i = 0; i < nf; i++) {
        if (flag_is(flags[i], "from", &v)) {
            char word[WORD_MAX + 300];
            if (check_image(st, what, v, 0, repl, sizeof(repl), ae) != 0)
                return -1;
            snprintf(word, sizeof(word), "--from=%s", repl[0] ? repl : v);
            put_flag(st->out, word);
        } else {
            put_flag(st->out, flags[i]);
        }
    }
    while (blank(*args)) /* Docker trims the arguments (splitCommand) */
        args++;
    al = strlen(args);
    while (al > 0 && blank(args[al - 1]))
        al--;
    if (add) {
        for (size_t i = 0; i < al; i++)
            if (args[i] == ':' || args[i] == '$' || args[i] == '\\' || args[i] == st->esc) {
                nb_apierr_set(ae, NB_E_FORBIDDEN, "url_forbidden",
                              "ADD takes files of the build only: no URL (it would be fetched "
                              "from the host's own network), no variable, no escape "
                              "(\"%.120s\"); COPY the files, or fetch them in a RUN step",
                              args);
                return -1;
            }
    }
    if (dd && al > 0)
        nb_buf_append(st->out, " --", 3);
    if (al > 0) {
        nb_buf_append(st->out, " ", 1);
        nb_buf_append(st->out, args, al);
    }
    nb_buf_append(st->out, "\n", 1);
    return 0;
}

static int do_instr(struct df_state *st, const char *line, struct nb_apierr *ae)
{
    static const char *const plain[] = {"run", "cmd",        "label",       "maintainer", "expose",
                                        "env", "entrypoint", "volume",      "user",       "workdir",
                                        "arg", "stopsignal", "healthcheck", "shell",      NULL};
    char cmd[32];
    const char *p = line, *rest;
    size_t n = 0;

    while (blank(*p) || *p == '\n')
        p++;
    while (isalpha((unsigned char)p[n]) && n < sizeof(cmd) - 1)
        n++;
    if (n == 0 || !(p[n] == '\0' || blank(p[n]))) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile", "not an instruction: \"%.80s\"", p);
        return -1;
    }
    lower(p, cmd, n + 1);
    if (strlen(p) > LINE_MAX_OUT) {
        /* Docker reads a line of at most 64 KiB, and this one is written as one line */
        nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile",
                      "an instruction (continued lines joined) is over %d bytes: %.40s...",
                      LINE_MAX_OUT, p);
        return -1;
    }
    rest = p + n;
    while (blank(*rest))
        rest++;
    if (!strcmp(cmd, "from"))
        return do_from(st, rest, ae);
    if (!strcmp(cmd, "copy") || !strcmp(cmd, "add"))
        return do_copy(st, cmd, rest, ae);
    if (!strcmp(cmd, "onbuild")) {
        nb_apierr_set(ae, NB_E_FORBIDDEN, "dockerfile_forbidden",
                      "ONBUILD is not allowed: its instructions would run in later builds "
                      "unchecked");
        return -1;
    }
    if (!strcmp(cmd, "run")) {
        char flags[FLAGS_MAX][WORD_MAX];
        const char *args;
        unsigned nf = 0;
        int dd = 0;
        if (split_flags(rest, flags, &nf, &args, &dd) != 0 || nf > 0 || dd) {
            nb_apierr_set(ae, NB_E_FORBIDDEN, "dockerfile_forbidden",
                          "RUN takes no flags here (--mount, --network, --security are BuildKit's; "
                          "nanobox builds with Docker's classic builder)");
            return -1;
        }
    }
    for (size_t i = 0; plain[i]; i++)
        if (!strcmp(cmd, plain[i])) {
            nb_buf_append(st->out, p, strlen(p));
            nb_buf_append(st->out, "\n", 1);
            return 0;
        }
    nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile", "unknown instruction: %.32s", cmd);
    return -1;
}

/*
 * One instruction, written as one line; that line, as Docker reads it
 * (trailing CRs and LFs trimmed, then an ending "esc[ \t]*" continues it),
 * must not continue into the next.
 */
static int do_line(struct df_state *st, const char *line, struct nb_apierr *ae)
{
    size_t start = st->out->len, n;
    const char *p;
    if (do_instr(st, line, ae) != 0)
        return -1;
    p = st->out->data + start;
    n = st->out->len - start;
    while (n > 0 && (p[n - 1] == '\n' || p[n - 1] == '\r'))
        n--;
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n > 0 && p[n - 1] == st->esc) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile",
                      "an instruction ends with its escape character");
        return -1;
    }
    return 0;
}

/* Docker's trimContinuationCharacter: s[0..*n) without its ending "esc[ \t]*"; 1 if it had one. */
static int continued(const char *s, size_t *n, char esc)
{
    size_t e = *n;
    while (e > 0 && (s[e - 1] == ' ' || s[e - 1] == '\t'))
        e--;
    if (e > 0 && s[e - 1] == esc) {
        *n = e - 1;
        return 1;
    }
    return 0;
}

/* A directive line "# key = value" (key a letter then letters or digits)? */
static int directive(const char *s, size_t n, char *key, size_t keylen, const char **val,
                     size_t *vlen)
{
    size_t i = 1, k = 0;
    if (n == 0 || s[0] != '#')
        return 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i >= n || !isalpha((unsigned char)s[i]))
        return 0;
    while (i < n && isalnum((unsigned char)s[i]) && k + 1 < keylen)
        key[k++] = (char)tolower((unsigned char)s[i++]);
    key[k] = '\0';
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i >= n || s[i] != '=')
        return 0;
    i++;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    while (n > i && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (i >= n)
        return 0;
    *val = s + i;
    *vlen = n - i;
    return 1;
}

int nb_dockerfile_rewrite(const char *df, size_t len, nb_dockerfile_resolve_fn resolve, void *arg,
                          struct nb_buf *out, char *esc_out, struct nb_apierr *ae)
{
    struct df_state *st = calloc(1, sizeof(*st));
    struct nb_buf line;
    int directives = 1, rc = 0, open = 0;
    size_t i = 0;

    if (st == NULL) {
        nb_apierr_set(ae, NB_E_INTERNAL, "internal", "out of memory");
        return -1;
    }
    if (memchr(df, '\0', len) != NULL) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile", "the Dockerfile holds a NUL byte");
        free(st);
        return -1;
    }
    st->resolve = resolve;
    st->arg = arg;
    st->out = out;
    st->esc = '\\';
    if (len >= 3 && !memcmp(df, "\xef\xbb\xbf", 3))
        i = 3; /* a byte-order mark */
    nb_buf_init(&line, len + 1);
    while (rc == 0 && i < len) {
        size_t s = i, e, a;
        while (i < len && df[i] != '\n')
            i++;
        e = i;
        if (i < len)
            i++;
        while (e > s && (df[e - 1] == '\r' || df[e - 1] == '\n'))
            e--;
        for (a = s; a < e && blank(df[a]); a++)
            ;
        if (open) {
            size_t n = e - s;
            if (a < e && df[a] == '#')
                continue; /* a comment inside a continued line */
            if (a == e)
                continue; /* an empty line, which does not end it either */
            open = continued(df + s, &n, st->esc);
            nb_buf_append(&line, df + s, n);
        } else {
            char key[32];
            const char *val;
            size_t vlen, n;
            if (directives && a < e && df[a] == '#' &&
                directive(df + a, e - a, key, sizeof(key), &val, &vlen)) {
                if (!strcmp(key, "syntax")) {
                    nb_apierr_set(ae, NB_E_FORBIDDEN, "dockerfile_forbidden",
                                  "the parser directive \"syntax\" is not allowed: nanobox builds "
                                  "with Docker's own Dockerfile reader, not another frontend");
                    rc = -1;
                    break;
                }
                if (strcmp(key, "escape") != 0)
                    continue; /* another directive: Docker's builder ignores it; not written */
                if (vlen != 1 || (val[0] != '\\' && val[0] != '`') || directives == 2) {
                    nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile",
                                  "the escape directive takes \\ or ` (once)");
                    rc = -1;
                    break;
                }
                st->esc = val[0];
                directives = 2;
                continue;
            }
            if (directives && st->esc != '\\')
                nb_buf_printf(out, "# escape=%c\n", st->esc);
            directives = 0;
            if (a == e || df[a] == '#')
                continue;
            n = e - a;
            open = continued(df + a, &n, st->esc);
            if (!open && n == 0)
                continue;
            nb_buf_reset(&line);
            nb_buf_append(&line, df + a, n);
        }
        if (!open)
            rc = do_line(st, line.data ? line.data : "", ae);
    }
    if (rc == 0 && open) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile",
                      "the Dockerfile ends inside a continued line (its last line ends with '%c')",
                      st->esc);
        rc = -1;
    }
    if (rc == 0 && st->n_from == 0) {
        nb_apierr_set(ae, NB_E_INVALID, "bad_dockerfile", "the Dockerfile has no FROM line");
        rc = -1;
    }
    *esc_out = st->esc;
    nb_buf_free(&line);
    free(st);
    return rc;
}
