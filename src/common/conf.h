/*
 * conf.h - the operator's configuration: one struct, one reader.
 *
 * The file is "key = value" lines with '#' comments (see docs/CONFIG.md).
 * Sizes accept k/m/g suffixes (powers of 1024); durations are seconds.
 * Every cap on outside input is a field here with a documented default.
 * The sandbox limits are both the default and the ceiling: a request may
 * narrow them, never widen them.
 */
#ifndef NB_CONF_H
#define NB_CONF_H

#include <stddef.h>
#include <stdint.h>

#define NB_CONF_MAX_IMAGES 16
#define NB_CONF_STR 256
/* a list of egress rules (netrule.h) in one config value */
#define NB_CONF_LIST 1000
/* a cluster node's name (node_name) and its etcd endpoints (etcd_endpoints) */
#define NB_NODE_NAME_MAX 32
#define NB_ETCD_ENDPOINTS_MAX 8
#define NB_ETCD_URL_MAX 256

struct nb_conf {
    /* identity and paths */
    char instance[64];        /* label nanobox.instance: several services can share one dockerd */
    char listen[NB_CONF_STR]; /* FastCGI unix socket path */
    char socket_group[64];    /* group that may connect (nginx's user) */
    unsigned socket_mode;     /* octal mode of the socket */
    char state_file[NB_CONF_STR]; /* the mmap'd table */
    char docker_socket[NB_CONF_STR];
    char api_key[128]; /* empty: auth disabled (only for tests) */
    /* also opens GET /metrics (a scraper's key); empty: none */
    char metrics_token[128];
    /* the API keys file (keys.h); empty in the file: "keys" next to the config file */
    char keys_file[NB_CONF_STR];
    char log_level[16];

    /* worker pool, like php-fpm's pm = dynamic */
    unsigned workers_min;         /* started at boot, never retired */
    unsigned workers_max;         /* hard ceiling on concurrent requests */
    unsigned workers_spare;       /* idle workers kept ready while below max */
    unsigned listen_backlog;      /* requests waiting for a worker, past workers_max */
    unsigned worker_idle_timeout; /* seconds an extra worker may stay idle */
    unsigned shutdown_timeout;    /* seconds SIGTERM waits for in-flight requests */

    /* table */
    unsigned max_sandboxes; /* slots in the state table */

    /* sandbox defaults = ceilings */
    char images[NB_CONF_MAX_IMAGES][128]; /* allow-list; [0] is the default */
    unsigned n_images;
    uint64_t memory;    /* bytes; MemorySwap is set equal */
    uint64_t nano_cpus; /* 1e9 = one CPU */
    int64_t pids;
    uint64_t tmp_size;                 /* tmpfs /tmp */
    uint64_t workspace_size;           /* tmpfs /workspace */
    char workspace[128];               /* path of the workspace inside the sandbox */
    char sandbox_user[64];             /* uid:gid run as when sandbox_uid_base is 0 */
    char sandbox_user_name[32];        /* name (and group name) id -un answers in a sandbox */
    unsigned sandbox_uid_base;         /* slot i runs as uid/gid base + i; 0: all as sandbox_user */
    unsigned sandbox_ptys;             /* ptys one sandbox may hold (its devpts "max") */
    unsigned sandbox_nofile;           /* RLIMIT_NOFILE of every sandbox process */
    unsigned files_watch_max_dirs;     /* directories one recursive watch may hold */
    char sandbox_dir[NB_CONF_STR];     /* files sandboxes bind-mount; empty: next to state_file */
    char seccomp_profile[NB_CONF_STR]; /* empty: the installed nanobox-seccomp.json */
    char init_path[NB_CONF_STR]; /* nanobox-init; empty: next to nanobox-fcgi, else installed */
    char kernel_dir
        [NB_CONF_STR]; /* code bridge files; empty: next to nanobox-fcgi, else installed */
    int allow_bridge;  /* may a request ask for network "bridge"? */
    /* bridge sandboxes: nanobox's own Docker network and egress policy (network.c) */
    char bridge_network[64];         /* Docker network name, created at start if missing */
    char bridge_interface[16];       /* its Linux bridge (IFNAMSIZ), named in the kernel rules */
    char bridge_subnet[32];          /* IPv4 CIDR; slot i gets address .2 + i */
    char egress_allow[NB_CONF_LIST]; /* operator's allow rules (beat egress_deny) */
    char egress_deny[NB_CONF_LIST];  /* operator's deny rules */
    char egress_widen[NB_CONF_LIST]; /* what a request's allow may open beyond the default */
    unsigned default_ttl;
    unsigned max_ttl;
    unsigned max_pause;      /* seconds a paused sandbox is kept before it is destroyed */
    unsigned idle_pause;     /* idle seconds before a pause without memory; 0: none (default) */
    unsigned warm_pool;      /* sandboxes of the defaults kept started; 0: none */
    unsigned warm_pool_code; /* sandboxes of code_image kept started, kernel running; 0: none */
    /* the adaptive pools (warm.c, warmsize.h): warm_pool and warm_pool_code are floors */
    unsigned warm_pool_max;      /* ceiling of the default image's pool */
    unsigned warm_pool_code_max; /* ceiling of code_image's pool */
    unsigned warm_pool_e2b_max;  /* ceiling of each pool of E2B's layout (floor 0); 0: none */
    unsigned warm_pool_idle;     /* seconds unused before a pool shrinks by one */
    uint64_t warm_pool_memory;   /* bytes all warm sandboxes may hold (memory limits); 0: any */
    uint64_t warm_pool_reserve;  /* bytes of MemAvailable a refill leaves to the host */
    unsigned warm_pool_parallel; /* warm sandboxes made at once (reaper's children); 1: in turn */

    /* exec */
    unsigned exec_timeout; /* default seconds */
    unsigned exec_timeout_max;
    size_t max_output; /* bytes of stdout+stderr kept per exec */
    size_t max_file;   /* bytes of one file written through the files API */

    /* code interpreter (POST /sandbox/{id}/code) */
    size_t code_max_bytes;   /* bytes of one cell's code */
    char code_image[128];    /* the image the code warm pool holds */
    char desktop_image[128]; /* E2B's "desktop" template, when built; empty: none */

    /* templates (templates.c): builds from a Dockerfile */
    char template_from[NB_CONF_LIST]; /* allowed FROM images; empty: the images above */
    char template_network[16];        /* network of RUN steps: "bridge" or "none" */
    char template_subnet[32];         /* IPv4 CIDR of the builds' own network (network.h) */
    uint64_t template_disk_max;       /* bytes a build may write (its steps' layers), 0: none */
    unsigned template_timeout;        /* seconds one build may take */
    uint64_t template_memory;         /* bytes of a build's RUN steps (a request may lower it) */
    uint64_t template_nano_cpus;      /* CPUs of a build (1e9 = one) */
    unsigned template_builds_max;     /* builds at once; the rest wait in a queue */
    size_t template_context_max;      /* bytes of a build context (Dockerfile + files, as tar) */
    /* snapshots (snapshot.c) */
    uint64_t snapshot_max; /* bytes of /workspace + /tmp a snapshot may take */
    unsigned fork_max;     /* sandboxes one fork may make (fork.c) */
    /* warm pools of templates (warm.c): "name:N, name2:M" */
    char warm_pool_template[NB_CONF_LIST];
    /* templates whose sandboxes have a root (sudo): names, or "*" for all */
    char root_templates[NB_CONF_LIST];
    /* bytes and inodes a root sandbox's writable layer may hold (0 bytes:
     * no bound): a file system of that size mounted over it (rootdisk.h);
     * the reaper measures a layer without one every root_disk_check
     * seconds (diskcap.h) */
    uint64_t root_disk_max;
    unsigned root_disk_inodes;
    unsigned root_disk_check;
    /* persistent volumes (volume.h): where their file systems live ("":
     * "volumes" next to the state file), the largest and the default size
     * of one, and what one owner (API key) may hold: volumes and bytes */
    char volume_dir[NB_CONF_STR];
    uint64_t volume_size_max;
    uint64_t volume_size_default;
    unsigned volume_max_count;
    uint64_t volume_quota;
    /* each sandbox's usage history (history.h): samples kept per sandbox
     * (0: none), taken by the reaper every metrics_interval seconds */
    unsigned metrics_history;
    unsigned metrics_interval;

    /* request caps */
    size_t max_body; /* bytes of a JSON request body */
    unsigned max_json_depth;
    size_t max_command;         /* bytes of an exec command */
    unsigned max_env;           /* entries in env maps */
    size_t max_env_bytes;       /* bytes of one env name + value */
    unsigned max_metadata;      /* entries in metadata */
    size_t max_metadata_bytes;  /* bytes of metadata, serialized */
    size_t docker_max_response; /* bytes of one Docker API answer */

    /* ephemeral ports */
    char fwd_path[NB_CONF_STR];  /* nanobox-fwd; empty: next to nanobox-fcgi */
    char ports_dir[NB_CONF_STR]; /* <id>-<port>.sock for nginx */
    unsigned port_min, port_max; /* host ports are allocated from this range */
    char port_bind[64];          /* address the host listeners bind */
    char public_host[128];       /* "host" in answers; empty: primary address */
    char port_url[NB_CONF_STR];  /* "url" in answers, {port} and {id} replaced */
    unsigned max_ports;          /* open ports per sandbox */
    unsigned max_port_duration;  /* seconds */
    /* a request to <port>-<id>.<ports domain> opens that port (ports.h) */
    int ports_on_demand;
    unsigned ports_on_demand_duration; /* seconds an on-demand port stays open */

    /* the E2B facade: E2B's home (/home/user), a link to the workspace; "": none */
    char e2b_home[128];
    /* sandboxes E2B clients create: e2b_home is their workspace and its name
     * their user's (E2B's layout), not a link to the workspace */
    int e2b_user_home;

    /* a node of a cluster (cluster.h, docs/CLUSTER.md); no etcd_endpoints: one machine alone */
    char node_name[NB_NODE_NAME_MAX + 1]; /* "": not a cluster node; ids carry no node tag */
    char node_url[NB_CONF_STR];           /* how fronts and other nodes reach this node's nginx */
    char etcd_endpoints[NB_CONF_LIST];    /* "http://host:port,..." of the etcd cluster */
    char etcd_prefix[128];                /* every key nanobox keeps in etcd starts with it */
    /* etcd over TLS (https:// endpoints): the CA that signed its certificate,
     * and this node's client certificate and key (PEM files); "": none */
    char etcd_cacert[NB_CONF_STR];
    char etcd_cert[NB_CONF_STR];
    char etcd_key[NB_CONF_STR];
    unsigned node_lease_ttl; /* seconds the node's record outlives its last renewal */
    int node_drain;          /* takes no new sandboxes; its own live out their TTL */
    /* seconds a node is gone before its volumes' rows are taken out (its
     * names free for others); 0: never */
    unsigned volume_orphan_after;
    /* node-to-node calls (placement) carry it; "": creates stay on the node they reach */
    char cluster_secret[128];
};

/* A node name (node_name): 1 to NB_NODE_NAME_MAX of a-z, 0-9 and '-', not first or last. */
int nb_conf_node_name_ok(const char *name);

/* etcd_endpoints: "http://host:port" or https:// URLs separated by commas,
 * into out; -1 with a message for none, too many or one of another kind. */
int nb_conf_endpoints(const char *list, char out[][NB_ETCD_URL_MAX], unsigned *n, char *err,
                      size_t errlen);

/* Fill with the built-in defaults (the values docs/CONFIG.md lists). */
void nb_conf_defaults(struct nb_conf *c);

/*
 * max_sandboxes = auto, the default: one slot per NB_AUTO_SLOT_MEMORY of
 * the host's memory and per NB_AUTO_SLOT_PIDS of its kernel.pid_max,
 * whichever gives fewer, from NB_AUTO_SANDBOXES_MIN to _MAX. An idle
 * sandbox costs the host ~4.4 MiB and ~12 tasks (its containerd shim's
 * threads, its agent), measured at 1000 (docs/PERFORMANCE.md): a full
 * table of idle ones then takes about a quarter of the memory and a third
 * of the pids, leaving the rest to those that work. docs/CONFIG.md says why.
 */
#define NB_AUTO_SLOT_MEMORY (16ULL << 20)
#define NB_AUTO_SLOT_PIDS 32
#define NB_AUTO_SANDBOXES_MIN 64
#define NB_AUTO_SANDBOXES_MAX 4096
unsigned nb_conf_sandboxes_for(uint64_t mem_total, uint64_t pid_max);
/* the same for this host (/proc/meminfo, /proc/sys/kernel/pid_max) */
unsigned nb_conf_auto_sandboxes(void);

/*
 * Read path over the defaults already in c. On error returns -1 and puts a
 * message naming the file, line and key in err.
 */
int nb_conf_load(struct nb_conf *c, const char *path, char *err, size_t errlen);

/*
 * The line reader under nb_conf_load, for other "key = value" files (the
 * CLI's cli.conf): calls fn for each pair, blanks and '#' comments skipped.
 * fn returns 0, or -1 with a message, which stops the read. Returns 0, or -1
 * with "path:line: message" in err and errno set to fopen's error when the
 * file could not be opened, to 0 otherwise.
 */
typedef int (*nb_conf_kv_fn)(void *ctx, const char *key, const char *value, char *msg,
                             size_t msglen);
int nb_conf_read(const char *path, nb_conf_kv_fn fn, void *ctx, char *err, size_t errlen);

/* Cross-key checks (also run by nb_conf_load); -1 with a message. */
int nb_conf_check(const struct nb_conf *c, char *err, size_t errlen);

/* Apply one "key", "value" pair (also used for command-line overrides). */
int nb_conf_set(struct nb_conf *c, const char *key, const char *value, char *err, size_t errlen);

/* Parse "256m", "1g", "4096" into bytes. Returns -1 on junk or overflow. */
int nb_parse_size(const char *s, uint64_t *out);

/* One template's warm pool of warm_pool_template. */
#define NB_WARM_TEMPLATES_MAX 8
struct nb_warm_template {
    char name[64]; /* a template's name */
    unsigned want; /* sandboxes of it kept started */
};
/*
 * Parse warm_pool_template ("name:N, name2:M", names as templates take
 * them, N at most 256, at most NB_WARM_TEMPLATES_MAX entries) into out:
 * the count, or -1 with err.
 */
int nb_conf_warm_templates(const char *spec, struct nb_warm_template out[NB_WARM_TEMPLATES_MAX],
                           char *err, size_t errlen);

/* Is image in the allow-list? */
int nb_conf_image_allowed(const struct nb_conf *c, const char *image);

#endif
