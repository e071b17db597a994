/*
 * main.c - nanobox-front: keeps a front nginx's map of the cluster's nodes
 * (frontmap.h) in step with etcd (docs/CLUSTER.md, "The front").
 *
 * It reads every node record under <prefix>nodes/, writes the include
 * when what it says changed (a new file renamed over the old, so nginx
 * never reads half of one) and tells nginx to reload (SIGHUP to the pid in
 * --nginx-pid: nginx's graceful reload, old workers finish their requests).
 * Then it watches the prefix from the revision it read, and reads again on
 * a change, or after WATCH_MS at most. etcd away: the map stays as it is
 * (routing needs no etcd), and it tries again every second.
 */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "conf.h"
#include "etcd.h"
#include "frontmap.h"
#include "log.h"

#define WATCH_MS 30000            /* longest watch: then a plain read again */
#define RETRY_US 1000000          /* between tries while etcd does not answer */
#define FRONT_RESPONSE (8u << 20) /* bytes of the node records' read */
#define FRONT_NODES_MAX 1024

struct nodes {
    struct nb_node_info *v;
    size_t n;
    unsigned unreadable;
};

static int add_node(void *arg, const struct nb_etcd_kv *kv)
{
    struct nodes *ns = arg;
    if (ns->n == FRONT_NODES_MAX)
        return 1;
    if (nb_node_info_parse(kv->value, kv->value_len, &ns->v[ns->n]) != 0) {
        ns->unreadable++;
        return 0;
    }
    ns->n++;
    return 0;
}

/* Does path hold exactly text? */
static int same_file(const char *path, const struct nb_buf *text)
{
    FILE *f = fopen(path, "rb");
    char *old;
    size_t got;
    int same;

    if (f == NULL)
        return 0;
    old = malloc(text->len + 2);
    got = old ? fread(old, 1, text->len + 1, f) : 0;
    fclose(f);
    same = old != NULL && got == text->len && (text->len == 0 || !memcmp(old, text->data, got));
    free(old);
    return same;
}

static int write_file(const char *path, const struct nb_buf *text)
{
    char tmp[NB_CONF_STR + 16];
    FILE *f;
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    f = fopen(tmp, "wb");
    if (f == NULL)
        return -1;
    if (fwrite(text->data, 1, text->len, f) != text->len || fclose(f) != 0) {
        unlink(tmp);
        return -1;
    }
    return rename(tmp, path);
}

static void reload_nginx(const char *pidfile)
{
    FILE *f;
    long pid = 0;
    if (pidfile == NULL)
        return;
    f = fopen(pidfile, "r");
    if (f == NULL || fscanf(f, "%ld", &pid) != 1 || pid <= 1) {
        nb_warn("no nginx pid in %s: the new map waits for nginx's next reload", pidfile);
        if (f)
            fclose(f);
        return;
    }
    fclose(f);
    if (kill((pid_t)pid, SIGHUP) != 0)
        nb_warn("cannot signal nginx %ld: %s", pid, strerror(errno));
}

/* Read the records and write the map if it changed: 0, or -1 (etcd did not answer). */
static int refresh(struct nb_etcd *e, const char *prefix, const char *out, const char *pidfile)
{
    struct nodes ns = {NULL, 0, 0};
    struct nb_buf text;
    char key[256];
    unsigned skipped;
    int rc = 0;

    ns.v = calloc(FRONT_NODES_MAX, sizeof(*ns.v));
    if (ns.v == NULL)
        return -1;
    snprintf(key, sizeof(key), "%snodes/", prefix);
    if (nb_etcd_get(e, key, 1, add_node, &ns) < 0) {
        free(ns.v);
        return -1;
    }
    nb_buf_init(&text, 1u << 22);
    nb_front_map(ns.v, ns.n, &text, &skipped);
    if (ns.unreadable + skipped > 0)
        nb_warn("%u node record(s) left out (unreadable, or a node_url that is not "
                "http://host:port)",
                ns.unreadable + skipped);
    if (!same_file(out, &text)) {
        if (write_file(out, &text) != 0) {
            nb_error("cannot write %s: %s", out, strerror(errno));
            rc = -1;
        } else {
            nb_info("%zu node(s) in the map %s", ns.n, out);
            reload_nginx(pidfile);
        }
    }
    nb_buf_free(&text);
    free(ns.v);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: nanobox-front [-c nanobox.conf] [--etcd URLS] [--prefix P] --out FILE\n"
               "                     [--nginx-pid FILE] [--once]\n"
               "Keeps FILE, the nginx include a front routes by, in step with the cluster's\n"
               "node records in etcd; reloads the nginx of --nginx-pid when it changes.\n"
               "  -c FILE          read etcd_endpoints, etcd_prefix and etcd's TLS files\n"
               "                   (etcd_cacert, etcd_cert, etcd_key) from a nanobox.conf\n"
               "  --etcd URLS      etcd's client URLs, comma-separated (over -c's)\n"
               "  --prefix P       the keys' prefix (default /nanobox/)\n"
               "  --out FILE       the include to write\n"
               "  --nginx-pid FILE the front nginx's pid file: SIGHUP after each change\n"
               "  --once           write the map once and exit (1 if etcd did not answer)\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"etcd", required_argument, NULL, 'e'},
        {"prefix", required_argument, NULL, 'p'},
        {"out", required_argument, NULL, 'o'},
        {"nginx-pid", required_argument, NULL, 'n'},
        {"once", no_argument, NULL, '1'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct nb_conf conf;
    struct nb_etcd e;
    const char *etcd = NULL, *prefix = NULL, *out = NULL, *pidfile = NULL;
    char err[512], key[256];
    int once = 0, c, said = 0;

    nb_conf_defaults(&conf);
    while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            if (nb_conf_load(&conf, optarg, err, sizeof(err)) != 0) {
                fprintf(stderr, "nanobox-front: %s\n", err);
                return 2;
            }
            break;
        case 'e':
            etcd = optarg;
            break;
        case 'p':
            prefix = optarg;
            break;
        case 'o':
            out = optarg;
            break;
        case 'n':
            pidfile = optarg;
            break;
        case '1':
            once = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (etcd == NULL)
        etcd = conf.etcd_endpoints;
    if (prefix == NULL)
        prefix = conf.etcd_prefix;
    if (out == NULL || etcd[0] == '\0' || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (strlen(prefix) < 2 || prefix[0] != '/' || prefix[strlen(prefix) - 1] != '/') {
        fprintf(stderr, "nanobox-front: the prefix must start and end with /\n");
        return 2;
    }
    nb_log_set_role("front");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (nb_etcd_init(&e, etcd, 2000, FRONT_RESPONSE) != 0) {
        fprintf(stderr, "nanobox-front: %s\n", e.err);
        return 2;
    }
    nb_etcd_set_tls(&e, conf.etcd_cacert, conf.etcd_cert, conf.etcd_key); /* -c's, if any */
    snprintf(key, sizeof(key), "%snodes/", prefix);
    /* SIGTERM's own action ends it: each write is a rename, never half a file */
    for (;;) {
        int64_t rev;
        if (refresh(&e, prefix, out, pidfile) != 0) {
            if (!said)
                nb_warn("etcd does not answer (%s); the map stays as it is", e.err);
            said = 1;
            if (access(out, F_OK) != 0) {
                /* nginx needs the include to start: a map of no node */
                struct nb_buf none;
                unsigned skipped;
                nb_buf_init(&none, 4096);
                nb_front_map(NULL, 0, &none, &skipped);
                if (write_file(out, &none) != 0)
                    nb_error("cannot write %s: %s", out, strerror(errno));
                nb_buf_free(&none);
            }
            if (once)
                break;
            usleep(RETRY_US);
            continue;
        }
        if (said)
            nb_info("etcd answers again");
        said = 0;
        if (once) {
            nb_etcd_cleanup(&e);
            return 0;
        }
        rev = e.revision;
        if (nb_etcd_watch(&e, key, rev + 1, WATCH_MS) < 0)
            usleep(RETRY_US);
    }
    nb_etcd_cleanup(&e);
    return 1; /* --once, and etcd did not answer */
}
