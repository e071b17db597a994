/*
 * conf.c - the one config reader (see conf.h for the keys).
 *
 * Keys map to struct fields through a table, so the reader, the defaults and
 * docs/CONFIG.md can be checked against each other by eye.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "netrule.h"
#include "procstat.h"

/* what a Docker network or Linux interface name may hold here */
#define NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"

#define MiB (1024ULL * 1024ULL)

unsigned nb_conf_sandboxes_for(uint64_t mem_total, uint64_t pid_max)
{
    uint64_t by_mem = mem_total / NB_AUTO_SLOT_MEMORY, by_pids = pid_max / NB_AUTO_SLOT_PIDS;
    uint64_t n = by_mem < by_pids ? by_mem : by_pids;

    if (n < NB_AUTO_SANDBOXES_MIN)
        n = NB_AUTO_SANDBOXES_MIN;
    return n > NB_AUTO_SANDBOXES_MAX ? NB_AUTO_SANDBOXES_MAX : (unsigned)n;
}

unsigned nb_conf_auto_sandboxes(void)
{
    /* unreadable: 4 GiB and the kernel's smallest default pid_max, which give 256 */
    uint64_t mem_kib = nb_proc_number("/proc/meminfo", "MemTotal:", 4ULL << 20);
    uint64_t pid_max = nb_proc_number("/proc/sys/kernel/pid_max", "", 32768);

    return nb_conf_sandboxes_for(mem_kib * 1024ULL, pid_max);
}

void nb_conf_defaults(struct nb_conf *c)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->instance, sizeof(c->instance), "default");
    snprintf(c->listen, sizeof(c->listen), "/run/nanobox/fcgi.sock");
    snprintf(c->socket_group, sizeof(c->socket_group), "www-data");
    c->socket_mode = 0660;
    snprintf(c->state_file, sizeof(c->state_file), "/var/lib/nanobox/state");
    snprintf(c->docker_socket, sizeof(c->docker_socket), "/var/run/docker.sock");
    snprintf(c->log_level, sizeof(c->log_level), "info");

    c->workers_min = 4;
    c->workers_max = 32;
    c->listen_backlog = 4096;
    c->workers_spare = 2;
    c->worker_idle_timeout = 30;
    c->shutdown_timeout = 330;

    c->max_sandboxes = nb_conf_auto_sandboxes();

    /* the base and the data-science template image.sh builds beside it */
    snprintf(c->images[0], sizeof(c->images[0]), "nanobox:latest");
    snprintf(c->images[1], sizeof(c->images[1]), "nanobox-python:latest");
    c->n_images = 2;
    c->memory = 256 * MiB;
    c->nano_cpus = 500000000ULL;
    c->pids = 128;
    c->tmp_size = 64 * MiB;
    c->workspace_size = 256 * MiB;
    snprintf(c->workspace, sizeof(c->workspace), "/workspace");
    snprintf(c->e2b_home, sizeof(c->e2b_home), "/home/user");
    c->e2b_user_home = 1;
    snprintf(c->sandbox_user, sizeof(c->sandbox_user), "1000:1000");
    snprintf(c->sandbox_user_name, sizeof(c->sandbox_user_name), "sandbox");
    c->sandbox_uid_base = 200000;
    c->sandbox_ptys = 8;
    c->sandbox_nofile = 4096;
    c->files_watch_max_dirs = 1024;
    c->allow_bridge = 0;
    snprintf(c->bridge_network, sizeof(c->bridge_network), "nanobox");
    snprintf(c->bridge_interface, sizeof(c->bridge_interface), "nanobox0");
    snprintf(c->bridge_subnet, sizeof(c->bridge_subnet), "10.213.0.0/16");
    c->egress_allow[0] = '\0';
    /* the operator's own networks, loopback, "this network", multicast and reserved */
    snprintf(
        c->egress_deny, sizeof(c->egress_deny),
        "10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 100.64.0.0/10 127.0.0.0/8 0.0.0.0/8 224.0.0.0/3");
    c->egress_widen[0] = '\0';
    c->default_ttl = 1800;
    c->max_ttl = 86400;
    c->max_pause = 86400;

    c->exec_timeout = 30;
    c->exec_timeout_max = 300;
    c->max_output = 1 * MiB;
    c->max_file = 100 * MiB;
    c->warm_pool = 2;
    c->warm_pool_code = 1;
    c->warm_pool_max = 8;
    c->warm_pool_code_max = 4;
    c->warm_pool_e2b_max = 8;
    c->warm_pool_idle = 60;
    c->warm_pool_memory = 0;
    c->warm_pool_reserve = 1024 * MiB;
    c->warm_pool_parallel = 2;
    c->code_max_bytes = 1 * MiB;
    snprintf(c->code_image, sizeof(c->code_image), "nanobox-python:latest");
    snprintf(c->desktop_image, sizeof(c->desktop_image), "nanobox-desktop:latest");
    snprintf(c->etcd_prefix, sizeof(c->etcd_prefix), "/nanobox/");
    c->node_lease_ttl = 5;
    c->volume_orphan_after = 86400; /* a day: a node down for a repair comes back with its disks */

    c->template_from[0] = '\0';
    snprintf(c->template_network, sizeof(c->template_network), "bridge");
    snprintf(c->template_subnet, sizeof(c->template_subnet), "10.214.0.0/24");
    c->template_disk_max = 4096 * MiB;
    c->template_timeout = 600;
    c->template_memory = 1024 * MiB;
    c->template_nano_cpus = 1000000000ULL;
    c->template_builds_max = 2;
    c->template_context_max = 64 * MiB;
    c->snapshot_max = 1024 * MiB;
    c->fork_max = 10;
    c->root_disk_max = 2048 * MiB; /* a root's writable layer (rootdisk.h) */
    c->root_disk_inodes = 131072;  /* mke2fs's own count for 2g */
    c->root_disk_check = 10;
    c->volume_size_max = 10240 * MiB;
    c->volume_size_default = 1024 * MiB;
    c->volume_max_count = 16;
    c->volume_quota = 20480 * MiB;
    c->metrics_history = 720; /* an hour of samples */
    c->metrics_interval = 5;  /* E2B's own period */

    c->max_body = 1 * MiB;
    c->max_json_depth = 32;
    c->max_command = 64 * 1024;
    c->max_env = 64;
    c->max_env_bytes = 4096;
    c->max_metadata = 16;
    c->max_metadata_bytes = 1000;
    c->docker_max_response = 4 * MiB;

    snprintf(c->ports_dir, sizeof(c->ports_dir), "/run/nanobox/ports");
    c->port_min = 20000;
    c->port_max = 29999;
    snprintf(c->port_bind, sizeof(c->port_bind), "0.0.0.0");
    snprintf(c->port_url, sizeof(c->port_url), "http://{port}-{id}.sandbox.localhost:8080/");
    c->max_ports = 8;
    c->max_port_duration = 86400;
    c->ports_on_demand = 0;
    c->ports_on_demand_duration = 3600;
}

int nb_parse_size(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    uint64_t mult = 1;

    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return -1;
    switch (tolower((unsigned char)*end)) {
    case 'k':
        mult = 1024ULL;
        end++;
        break;
    case 'm':
        mult = MiB;
        end++;
        break;
    case 'g':
        mult = 1024ULL * MiB;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return -1;
    if (v > UINT64_MAX / mult)
        return -1;
    *out = v * mult;
    return 0;
}

static int parse_uint(const char *s, unsigned long long max, unsigned long long *out, int base)
{
    char *end;
    unsigned long long v;
    if (!isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    v = strtoull(s, &end, base);
    if (errno == ERANGE || *end != '\0' || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    if (!strcmp(s, "yes") || !strcmp(s, "true") || !strcmp(s, "on") || !strcmp(s, "1"))
        *out = 1;
    else if (!strcmp(s, "no") || !strcmp(s, "false") || !strcmp(s, "off") || !strcmp(s, "0"))
        *out = 0;
    else
        return -1;
    return 0;
}

/* Parse "0.5" into nano-CPUs without floating point surprises. */
static int parse_cpus(const char *s, uint64_t *out)
{
    uint64_t whole = 0, frac = 0, scale = 1000000000ULL;
    const char *p = s;
    if (!isdigit((unsigned char)*p) && *p != '.')
        return -1;
    while (isdigit((unsigned char)*p)) {
        whole = whole * 10 + (uint64_t)(*p - '0');
        if (whole > 1024)
            return -1;
        p++;
    }
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            if (scale > 1) {
                scale /= 10;
                frac += (uint64_t)(*p - '0') * scale;
            }
            p++;
        }
    }
    if (*p != '\0')
        return -1;
    *out = whole * 1000000000ULL + frac;
    return *out > 0 ? 0 : -1;
}

enum key_type { K_STR, K_UINT, K_SIZE, K_BOOL, K_MODE };

struct key {
    const char *name;
    enum key_type type;
    size_t off;
    size_t size; /* strings: buffer size; numbers: field size */
    unsigned long long max;
};

#define F(field) offsetof(struct nb_conf, field), sizeof(((struct nb_conf *)0)->field)

static const struct key keys[] = {
    {"instance", K_STR, F(instance), 0},
    {"listen", K_STR, F(listen), 0},
    {"socket_group", K_STR, F(socket_group), 0},
    {"socket_mode", K_MODE, F(socket_mode), 07777},
    {"state_file", K_STR, F(state_file), 0},
    {"docker_socket", K_STR, F(docker_socket), 0},
    {"api_key", K_STR, F(api_key), 0},
    {"metrics_token", K_STR, F(metrics_token), 0},
    {"keys_file", K_STR, F(keys_file), 0},
    {"log_level", K_STR, F(log_level), 0},
    {"workers_min", K_UINT, F(workers_min), 1024},
    {"workers_max", K_UINT, F(workers_max), 1024},
    {"workers_spare", K_UINT, F(workers_spare), 1024},
    {"listen_backlog", K_UINT, F(listen_backlog), 65535},
    {"worker_idle_timeout", K_UINT, F(worker_idle_timeout), 86400},
    {"shutdown_timeout", K_UINT, F(shutdown_timeout), 86400},
    {"max_sandboxes", K_UINT, F(max_sandboxes), 65536},
    {"memory", K_SIZE, F(memory), 1ULL << 40},
    {"pids", K_UINT, F(pids), 1 << 22},
    {"tmp_size", K_SIZE, F(tmp_size), 1ULL << 40},
    {"workspace_size", K_SIZE, F(workspace_size), 1ULL << 40},
    {"workspace", K_STR, F(workspace), 0},
    {"e2b_home", K_STR, F(e2b_home), 0},
    {"e2b_user_home", K_BOOL, F(e2b_user_home), 0},
    {"node_name", K_STR, F(node_name), 0},
    {"node_url", K_STR, F(node_url), 0},
    {"etcd_endpoints", K_STR, F(etcd_endpoints), 0},
    {"etcd_prefix", K_STR, F(etcd_prefix), 0},
    {"etcd_cacert", K_STR, F(etcd_cacert), 0},
    {"etcd_cert", K_STR, F(etcd_cert), 0},
    {"etcd_key", K_STR, F(etcd_key), 0},
    {"node_lease_ttl", K_UINT, F(node_lease_ttl), 3600},
    {"node_drain", K_BOOL, F(node_drain), 0},
    {"volume_orphan_after", K_UINT, F(volume_orphan_after), 10 * 365 * 86400ULL},
    {"cluster_secret", K_STR, F(cluster_secret), 0},
    {"sandbox_user", K_STR, F(sandbox_user), 0},
    {"sandbox_user_name", K_STR, F(sandbox_user_name), 0},
    {"sandbox_uid_base", K_UINT, F(sandbox_uid_base), 4000000000ULL},
    {"sandbox_ptys", K_UINT, F(sandbox_ptys), 1024},
    {"sandbox_nofile", K_UINT, F(sandbox_nofile), 1 << 20},
    {"files_watch_max_dirs", K_UINT, F(files_watch_max_dirs), 65536},
    {"sandbox_dir", K_STR, F(sandbox_dir), 0},
    {"seccomp_profile", K_STR, F(seccomp_profile), 0},
    {"allow_bridge", K_BOOL, F(allow_bridge), 0},
    {"bridge_network", K_STR, F(bridge_network), 0},
    {"bridge_interface", K_STR, F(bridge_interface), 0},
    {"bridge_subnet", K_STR, F(bridge_subnet), 0},
    {"egress_allow", K_STR, F(egress_allow), 0},
    {"egress_deny", K_STR, F(egress_deny), 0},
    {"egress_widen", K_STR, F(egress_widen), 0},
    {"default_ttl", K_UINT, F(default_ttl), 10 * 365 * 86400ULL},
    {"max_ttl", K_UINT, F(max_ttl), 10 * 365 * 86400ULL},
    {"max_pause", K_UINT, F(max_pause), 10 * 365 * 86400ULL},
    {"idle_pause", K_UINT, F(idle_pause), 10 * 365 * 86400ULL},
    {"exec_timeout", K_UINT, F(exec_timeout), 86400},
    {"exec_timeout_max", K_UINT, F(exec_timeout_max), 86400},
    {"max_output", K_SIZE, F(max_output), 1ULL << 32},
    {"max_file", K_SIZE, F(max_file), 1ULL << 40},
    {"warm_pool", K_UINT, F(warm_pool), 256},
    {"warm_pool_code", K_UINT, F(warm_pool_code), 256},
    {"warm_pool_max", K_UINT, F(warm_pool_max), 256},
    {"warm_pool_code_max", K_UINT, F(warm_pool_code_max), 256},
    {"warm_pool_e2b_max", K_UINT, F(warm_pool_e2b_max), 256},
    {"warm_pool_idle", K_UINT, F(warm_pool_idle), 86400},
    {"warm_pool_memory", K_SIZE, F(warm_pool_memory), 1ULL << 50},
    {"warm_pool_reserve", K_SIZE, F(warm_pool_reserve), 1ULL << 50},
    {"warm_pool_parallel", K_UINT, F(warm_pool_parallel), 16},
    /* a cell goes to the sandbox in one agent frame (at most 1 MiB) */
    {"code_max_bytes", K_SIZE, F(code_max_bytes), MiB},
    {"code_image", K_STR, F(code_image), 0},
    {"desktop_image", K_STR, F(desktop_image), 0},
    {"template_from", K_STR, F(template_from), 0},
    {"root_templates", K_STR, F(root_templates), 0},
    {"root_disk_max", K_SIZE, F(root_disk_max), 1ULL << 50},
    {"root_disk_inodes", K_UINT, F(root_disk_inodes), 1U << 30},
    {"root_disk_check", K_UINT, F(root_disk_check), 3600},
    {"volume_dir", K_STR, F(volume_dir), 0},
    {"volume_size_max", K_SIZE, F(volume_size_max), 1ULL << 50},
    {"volume_size_default", K_SIZE, F(volume_size_default), 1ULL << 50},
    {"volume_max_count", K_UINT, F(volume_max_count), 100000},
    {"volume_quota", K_SIZE, F(volume_quota), 1ULL << 50},
    {"metrics_history", K_UINT, F(metrics_history), 17280},
    {"metrics_interval", K_UINT, F(metrics_interval), 3600},
    {"template_network", K_STR, F(template_network), 0},
    {"template_subnet", K_STR, F(template_subnet), 0},
    {"template_disk_max", K_SIZE, F(template_disk_max), 1ULL << 50},
    {"template_timeout", K_UINT, F(template_timeout), 86400},
    {"template_memory", K_SIZE, F(template_memory), 1ULL << 40},
    {"template_builds_max", K_UINT, F(template_builds_max), 64},
    {"template_context_max", K_SIZE, F(template_context_max), 1ULL << 32},
    {"snapshot_max", K_SIZE, F(snapshot_max), 1ULL << 40},
    {"fork_max", K_UINT, F(fork_max), 1000},
    {"warm_pool_template", K_STR, F(warm_pool_template), 0},
    {"max_body", K_SIZE, F(max_body), 1ULL << 32},
    {"max_json_depth", K_UINT, F(max_json_depth), 1024},
    {"max_command", K_SIZE, F(max_command), 1ULL << 24},
    {"max_env", K_UINT, F(max_env), 4096},
    {"max_env_bytes", K_SIZE, F(max_env_bytes), 1ULL << 20},
    {"max_metadata", K_UINT, F(max_metadata), 1024},
    {"max_metadata_bytes", K_SIZE, F(max_metadata_bytes), 1000},
    {"docker_max_response", K_SIZE, F(docker_max_response), 1ULL << 32},
    {"fwd_path", K_STR, F(fwd_path), 0},
    {"init_path", K_STR, F(init_path), 0},
    {"kernel_dir", K_STR, F(kernel_dir), 0},
    {"ports_dir", K_STR, F(ports_dir), 0},
    {"port_bind", K_STR, F(port_bind), 0},
    {"public_host", K_STR, F(public_host), 0},
    {"port_url", K_STR, F(port_url), 0},
    {"max_ports", K_UINT, F(max_ports), 16},
    {"max_port_duration", K_UINT, F(max_port_duration), 10 * 365 * 86400ULL},
    {"ports_on_demand", K_BOOL, F(ports_on_demand), 0},
    {"ports_on_demand_duration", K_UINT, F(ports_on_demand_duration), 10 * 365 * 86400ULL},
};

static void store_uint(void *field, size_t size, unsigned long long v)
{
    switch (size) {
    case sizeof(uint64_t):
        *(uint64_t *)field = v;
        break;
    case sizeof(uint32_t):
        *(uint32_t *)field = (uint32_t)v;
        break;
    default:
        *(uint16_t *)field = (uint16_t)v;
        break;
    }
}

int nb_conf_set(struct nb_conf *c, const char *key, const char *value, char *err, size_t errlen)
{
    if (!strcmp(key, "max_sandboxes") && !strcmp(value, "auto")) {
        c->max_sandboxes = nb_conf_auto_sandboxes();
        return 0;
    }
    if (!strcmp(key, "cpus")) {
        if (parse_cpus(value, &c->nano_cpus) != 0) {
            snprintf(err, errlen, "cpus: expected a positive decimal like 0.5, got \"%s\"", value);
            return -1;
        }
        return 0;
    }
    if (!strcmp(key, "template_cpus")) {
        if (parse_cpus(value, &c->template_nano_cpus) != 0) {
            snprintf(err, errlen, "template_cpus: expected a positive decimal like 1, got \"%s\"",
                     value);
            return -1;
        }
        return 0;
    }
    if (!strcmp(key, "port_range")) {
        unsigned lo, hi;
        char tail;
        if (sscanf(value, "%u-%u%c", &lo, &hi, &tail) != 2 || lo < 1 || hi > 65535 || lo > hi) {
            snprintf(err, errlen, "port_range: expected LOW-HIGH within 1-65535, got \"%s\"",
                     value);
            return -1;
        }
        c->port_min = lo;
        c->port_max = hi;
        return 0;
    }
    if (!strcmp(key, "images")) {
        char tmp[NB_CONF_MAX_IMAGES * 128], *save = NULL, *tok;
        unsigned n = 0;
        snprintf(tmp, sizeof(tmp), "%s", value);
        for (tok = strtok_r(tmp, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
            if (n == NB_CONF_MAX_IMAGES || strlen(tok) >= sizeof(c->images[0])) {
                snprintf(err, errlen, "images: at most %d names of under %zu bytes",
                         NB_CONF_MAX_IMAGES, sizeof(c->images[0]));
                return -1;
            }
            snprintf(c->images[n++], sizeof(c->images[0]), "%s", tok);
        }
        if (n == 0) {
            snprintf(err, errlen, "images: the allow-list may not be empty");
            return -1;
        }
        c->n_images = n;
        return 0;
    }
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const struct key *k = &keys[i];
        void *field = (char *)c + k->off;
        unsigned long long v;
        uint64_t sz;
        int b;
        if (strcmp(key, k->name) != 0)
            continue;
        switch (k->type) {
        case K_STR:
            if (strlen(value) >= k->size) {
                snprintf(err, errlen, "%s: longer than %zu bytes", key, k->size - 1);
                return -1;
            }
            memcpy(field, value, strlen(value) + 1);
            return 0;
        case K_UINT:
        case K_MODE:
            if (parse_uint(value, k->max, &v, k->type == K_MODE ? 8 : 10) != 0) {
                snprintf(err, errlen, "%s: expected %s up to %llu, got \"%s\"", key,
                         k->type == K_MODE ? "an octal mode" : "a whole number", k->max, value);
                return -1;
            }
            store_uint(field, k->size, v);
            return 0;
        case K_SIZE:
            if (nb_parse_size(value, &sz) != 0 || sz > k->max) {
                snprintf(err, errlen,
                         "%s: expected a size like 256m (at most %llu bytes), got \"%s\"", key,
                         k->max, value);
                return -1;
            }
            store_uint(field, k->size, sz);
            return 0;
        case K_BOOL:
            if (parse_bool(value, &b) != 0) {
                snprintf(err, errlen, "%s: expected yes or no, got \"%s\"", key, value);
                return -1;
            }
            *(int *)field = b;
            return 0;
        }
    }
    snprintf(err, errlen, "unknown key \"%s\"", key);
    return -1;
}

static char *trim(char *s)
{
    char *e;
    while (isspace((unsigned char)*s))
        s++;
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/*
 * The bridge keys are named in kernel rules and Docker calls, so their
 * characters are checked here once; the egress lists must parse, and the
 * subnet must hold an address per slot (network, gateway and broadcast
 * aside), since slot i always gets the same address.
 */
static int check_bridge(const struct nb_conf *c, char *err, size_t errlen)
{
    struct nb_netrules l;
    struct nb_netrule sub;
    char msg[200];
    const struct {
        const char *key, *val;
    } lists[] = {{"egress_allow", c->egress_allow},
                 {"egress_deny", c->egress_deny},
                 {"egress_widen", c->egress_widen}};

    if (c->bridge_interface[0] == '\0' ||
        strspn(c->bridge_interface, NAME_CHARS) != strlen(c->bridge_interface) ||
        c->bridge_network[0] == '\0' ||
        strspn(c->bridge_network, NAME_CHARS) != strlen(c->bridge_network)) {
        snprintf(err, errlen,
                 "bridge_network and bridge_interface must be non-empty [A-Za-z0-9_.-] "
                 "(bridge_interface at most 15 characters)");
        return -1;
    }
    if (nb_netrule_parse(c->bridge_subnet, &sub, msg, sizeof(msg)) != 0 || sub.port != 0 ||
        sub.prefix > 30 || sub.prefix < 8) {
        snprintf(err, errlen,
                 "bridge_subnet must be an IPv4 CIDR between /8 and /30, like 10.213.0.0/16");
        return -1;
    }
    if ((1ULL << (32 - sub.prefix)) < (unsigned long long)c->max_sandboxes + 3) {
        snprintf(err, errlen, "bridge_subnet %s has fewer addresses than max_sandboxes (%u) + 3",
                 c->bridge_subnet, c->max_sandboxes);
        return -1;
    }
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        if (nb_netrules_parse_list(lists[i].val, &l, msg, sizeof(msg)) != 0) {
            snprintf(err, errlen, "%s: %s", lists[i].key, msg);
            return -1;
        }
    }
    {
        struct nb_netrule ts, bs;
        if (nb_netrule_parse(c->template_subnet, &ts, msg, sizeof(msg)) != 0 || ts.port != 0 ||
            ts.prefix > 29 || ts.prefix < 8) {
            snprintf(err, errlen,
                     "template_subnet must be an IPv4 CIDR between /8 and /29, like 10.214.0.0/24");
            return -1;
        }
        if (nb_netrule_parse(c->bridge_subnet, &bs, msg, sizeof(msg)) == 0 &&
            nb_netrule_overlaps(&ts, &bs)) {
            snprintf(err, errlen, "template_subnet %s overlaps bridge_subnet %s",
                     c->template_subnet, c->bridge_subnet);
            return -1;
        }
    }
    return 0;
}

int nb_conf_endpoints(const char *list, char out[][NB_ETCD_URL_MAX], unsigned *n, char *err,
                      size_t errlen)
{
    const char *p = list;
    *n = 0;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && (*p == ' ' || *p == '\t'))
            p++, len--;
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len > 0) {
            if (*n == NB_ETCD_ENDPOINTS_MAX) {
                snprintf(err, errlen, "etcd_endpoints: more than %d endpoints",
                         NB_ETCD_ENDPOINTS_MAX);
                return -1;
            }
            if (len >= NB_ETCD_URL_MAX ||
                (strncmp(p, "http://", 7) != 0 && strncmp(p, "https://", 8) != 0)) {
                snprintf(err, errlen,
                         "etcd_endpoints: \"%.*s\" is not an http:// or https:// URL "
                         "(of at most %d bytes)",
                         (int)(len > 64 ? 64 : len), p, NB_ETCD_URL_MAX - 1);
                return -1;
            }
            memcpy(out[*n], p, len);
            out[*n][len] = '\0';
            while (len > 0 && out[*n][len - 1] == '/')
                out[*n][--len] = '\0'; /* "/v3/..." is appended */
            (*n)++;
        }
        if (end == NULL)
            break;
        p = end + 1;
    }
    if (*n == 0) {
        snprintf(err, errlen, "etcd_endpoints: no endpoint given");
        return -1;
    }
    return 0;
}

int nb_conf_node_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > NB_NODE_NAME_MAX || name[0] == '-' || name[n - 1] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
              name[i] == '-'))
            return 0;
    return 1;
}

static int check_endpoints(const char *list, char *err, size_t errlen)
{
    char eps[NB_ETCD_ENDPOINTS_MAX][NB_ETCD_URL_MAX];
    unsigned n;
    return nb_conf_endpoints(list, eps, &n, err, errlen);
}

/*
 * A cluster node (etcd_endpoints set) needs a name and a URL; a name alone
 * tags the ids of a machine that may join a cluster later.
 */
static int cluster_check(const struct nb_conf *c, char *err, size_t errlen)
{
    size_t n = strlen(c->etcd_prefix);
    if (c->node_name[0] != '\0' && !nb_conf_node_name_ok(c->node_name)) {
        snprintf(err, errlen,
                 "node_name must be 1 to %d of a-z, 0-9 and - (not first or last): it is a DNS "
                 "label and an nginx upstream's name",
                 NB_NODE_NAME_MAX);
        return -1;
    }
    if (n < 2 || c->etcd_prefix[0] != '/' || c->etcd_prefix[n - 1] != '/') {
        snprintf(err, errlen, "etcd_prefix must start and end with /, like /nanobox/");
        return -1;
    }
    if (c->node_lease_ttl < 2) {
        snprintf(err, errlen, "node_lease_ttl must be 2 to 3600 seconds");
        return -1;
    }
    if (c->cluster_secret[0] != '\0' &&
        (strlen(c->cluster_secret) < 16 || c->etcd_endpoints[0] == '\0')) {
        snprintf(err, errlen,
                 "cluster_secret must be at least 16 characters, on a cluster node "
                 "(etcd_endpoints set)");
        return -1;
    }
    if ((c->etcd_cert[0] == '\0') != (c->etcd_key[0] == '\0')) {
        snprintf(err, errlen,
                 "etcd_cert and etcd_key go together: a client certificate and its key");
        return -1;
    }
    if ((c->etcd_cacert[0] && c->etcd_cacert[0] != '/') ||
        (c->etcd_cert[0] && c->etcd_cert[0] != '/') || (c->etcd_key[0] && c->etcd_key[0] != '/')) {
        snprintf(err, errlen, "etcd_cacert, etcd_cert and etcd_key are absolute paths");
        return -1;
    }
    if (c->etcd_endpoints[0] == '\0')
        return 0;
    if (check_endpoints(c->etcd_endpoints, err, errlen) != 0)
        return -1;
    if (c->node_name[0] == '\0' ||
        (strncmp(c->node_url, "http://", 7) != 0 && strncmp(c->node_url, "https://", 8) != 0)) {
        snprintf(err, errlen,
                 "etcd_endpoints makes this a cluster node: node_name and node_url (http:// or "
                 "https://, how other nodes reach this one) must be set too");
        return -1;
    }
    return 0;
}

/*
 * e2b_home: "", the workspace itself, or /home/<name>. Otherwise nanobox
 * mounts a /home of its own (read-only) holding <name>, a link to the
 * workspace, so the workspace must not be under /home.
 */
static int e2b_home_check(const struct nb_conf *c, char *err, size_t errlen)
{
    const char *n = c->e2b_home + 6, *p;
    if (c->e2b_home[0] == '\0' || !strcmp(c->e2b_home, c->workspace))
        return 0;
    for (p = n; (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'; p++)
        ;
    if (strncmp(c->e2b_home, "/home/", 6) != 0 || p == n || *p != '\0' || p - n > 32) {
        snprintf(err, errlen,
                 "e2b_home must be /home/<name> (a-z, 0-9, _, -), the workspace, or empty");
        return -1;
    }
    if (!strncmp(c->workspace, "/home/", 6) || !strcmp(c->workspace, "/home")) {
        snprintf(err, errlen,
                 "e2b_home must be the workspace, or empty, when the workspace is under /home");
        return -1;
    }
    return 0;
}

int nb_conf_check(const struct nb_conf *c, char *err, size_t errlen)
{
    const char *p = c->sandbox_user;

    if (c->workers_min < 1 || c->workers_max < c->workers_min) {
        snprintf(err, errlen, "workers_min must be >= 1 and <= workers_max");
        return -1;
    }
    if (c->listen_backlog < 16) {
        snprintf(err, errlen, "listen_backlog must be at least 16");
        return -1;
    }
    if (c->default_ttl < 1 || c->default_ttl > c->max_ttl) {
        snprintf(err, errlen, "default_ttl must be between 1 and max_ttl");
        return -1;
    }
    if (c->max_pause < 1) {
        snprintf(err, errlen, "max_pause must be at least 1 second");
        return -1;
    }
    if (c->exec_timeout < 1 || c->exec_timeout > c->exec_timeout_max) {
        snprintf(err, errlen, "exec_timeout must be between 1 and exec_timeout_max");
        return -1;
    }
    if (c->max_sandboxes < 1) {
        snprintf(err, errlen, "max_sandboxes must be >= 1");
        return -1;
    }
    if (c->warm_pool_parallel < 1) {
        snprintf(err, errlen, "warm_pool_parallel must be at least 1 (one at a time)");
        return -1;
    }
    if (c->warm_pool_idle < 1) {
        snprintf(err, errlen, "warm_pool_idle must be at least 1 second");
        return -1;
    }
    /* a budget below one sandbox would turn every pool off without a word */
    if (c->warm_pool_memory != 0 && c->warm_pool_memory < c->memory) {
        snprintf(err, errlen,
                 "warm_pool_memory must be 0 (no budget) or at least memory (one sandbox)");
        return -1;
    }
    {
        struct nb_warm_template wt[NB_WARM_TEMPLATES_MAX];
        if (nb_conf_warm_templates(c->warm_pool_template, wt, err, errlen) < 0)
            return -1;
    }
    if (strcmp(c->template_network, "bridge") != 0 && strcmp(c->template_network, "none") != 0) {
        snprintf(err, errlen, "template_network must be bridge or none");
        return -1;
    }
    if (c->template_timeout < 1 || c->template_memory < 6 * MiB || c->template_context_max < 4096) {
        snprintf(err, errlen,
                 "template_timeout must be >= 1, template_memory >= 6m, "
                 "template_context_max >= 4k");
        return -1;
    }
    if (c->memory < 6 * MiB) {
        snprintf(err, errlen, "memory must be at least 6m (Docker's minimum)");
        return -1;
    }
    /* zero would mean "unlimited" to Docker and to tmpfs: never by accident */
    if (c->pids < 8 || c->tmp_size < MiB || c->workspace_size < MiB || c->max_output < 1024) {
        snprintf(err, errlen,
                 "pids must be >= 8, tmp_size and workspace_size >= 1m, max_output >= 1k");
        return -1;
    }
    /* numeric, because the tmpfs workspace is chowned to it by number */
    while (*p >= '0' && *p <= '9')
        p++;
    if (p == c->sandbox_user || (*p == ':' && !(p[1] >= '0' && p[1] <= '9')) || (*p && *p != ':')) {
        snprintf(err, errlen, "sandbox_user must be numeric uid:gid, like 1000:1000");
        return -1;
    }
    if (*p == ':') {
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
        if (*p) {
            snprintf(err, errlen, "sandbox_user must be numeric uid:gid, like 1000:1000");
            return -1;
        }
    }
    /* uids below 65536 are where login and system users live */
    if (c->sandbox_uid_base != 0 &&
        (c->sandbox_uid_base < 65536 ||
         (uint64_t)c->sandbox_uid_base + c->max_sandboxes > 4000000000ULL)) {
        snprintf(err, errlen,
                 "sandbox_uid_base must be 0 (off), or from 65536 with room for max_sandboxes");
        return -1;
    }
    if (c->files_watch_max_dirs < 1) {
        snprintf(err, errlen, "files_watch_max_dirs must be >= 1");
        return -1;
    }
    if (c->sandbox_ptys < 1 || c->sandbox_nofile < 64) {
        snprintf(err, errlen, "sandbox_ptys must be >= 1 and sandbox_nofile >= 64");
        return -1;
    }
    if (e2b_home_check(c, err, errlen) != 0)
        return -1;
    if (cluster_check(c, err, errlen) != 0)
        return -1;
    /* it becomes a line of the sandbox's /etc/passwd and /etc/group */
    for (p = c->sandbox_user_name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            break;
    if (c->sandbox_user_name[0] == '\0' || c->sandbox_user_name[0] == '-' || *p) {
        snprintf(err, errlen, "sandbox_user_name must be a user name of a-z, 0-9, _ and -");
        return -1;
    }
    if (c->max_body < 1024 || c->max_json_depth < 2) {
        snprintf(err, errlen, "max_body must be >= 1k and max_json_depth >= 2");
        return -1;
    }
    if (c->code_max_bytes < 1) {
        snprintf(err, errlen, "code_max_bytes must be at least 1 byte (at most 1m)");
        return -1;
    }
    if (c->root_disk_max != 0 && c->root_disk_max < 16 * MiB) {
        snprintf(err, errlen, "root_disk_max must be 0 (no bound) or at least 16m");
        return -1;
    }
    if (c->volume_size_max < 16 * MiB || c->volume_size_default < 16 * MiB ||
        c->volume_size_default > c->volume_size_max) {
        snprintf(err, errlen,
                 "volume_size_max and volume_size_default must be at least 16m, the default "
                 "at most the max");
        return -1;
    }
    if (c->root_disk_inodes < 256) {
        snprintf(err, errlen, "root_disk_inodes must be at least 256");
        return -1;
    }
    if (c->root_disk_check < 1) {
        snprintf(err, errlen, "root_disk_check must be 1 to 3600 seconds");
        return -1;
    }
    if (c->metrics_interval < 1) {
        snprintf(err, errlen, "metrics_interval must be 1 to 3600 seconds");
        return -1;
    }
    return check_bridge(c, err, errlen);
}

int nb_conf_read(const char *path, nb_conf_kv_fn fn, void *ctx, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    char line[1024], msg[256];
    unsigned lineno = 0;
    int rc = 0;

    if (f == NULL) {
        int saved = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        errno = saved;
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *eq, *key, *value, *hash;
        lineno++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            snprintf(err, errlen, "%s:%u: line longer than %zu bytes", path, lineno,
                     sizeof(line) - 2);
            rc = -1;
            break;
        }
        /* '#' starts a comment at the line start or after a blank, so a value may hold one */
        for (hash = line; (hash = strchr(hash, '#')) != NULL; hash++) {
            if (hash == line || hash[-1] == ' ' || hash[-1] == '\t') {
                *hash = '\0';
                break;
            }
        }
        key = trim(line);
        if (*key == '\0')
            continue;
        eq = strchr(key, '=');
        if (eq == NULL) {
            snprintf(err, errlen, "%s:%u: expected \"key = value\"", path, lineno);
            rc = -1;
            break;
        }
        *eq = '\0';
        value = trim(eq + 1);
        key = trim(key);
        if (fn(ctx, key, value, msg, sizeof(msg)) != 0) {
            snprintf(err, errlen, "%s:%u: %s", path, lineno, msg);
            rc = -1;
            break;
        }
    }
    fclose(f);
    if (rc != 0)
        errno = 0; /* not an open failure */
    return rc;
}

static int conf_load_kv(void *ctx, const char *key, const char *value, char *msg, size_t msglen)
{
    return nb_conf_set(ctx, key, value, msg, msglen);
}

int nb_conf_load(struct nb_conf *c, const char *path, char *err, size_t errlen)
{
    char msg[256];

    if (nb_conf_read(path, conf_load_kv, c, err, errlen) != 0)
        return -1;
    /* the keys file defaults to "keys" in the config file's directory */
    if (c->keys_file[0] == '\0') {
        const char *slash = strrchr(path, '/');
        int dl = slash == NULL ? 1 : slash == path ? 1 : (int)(slash - path);
        snprintf(c->keys_file, sizeof(c->keys_file), "%.*s/keys", dl, slash == NULL ? "." : path);
    }
    if (nb_conf_check(c, msg, sizeof(msg)) != 0) {
        snprintf(err, errlen, "%s: %s", path, msg);
        return -1;
    }
    return 0;
}

int nb_conf_warm_templates(const char *spec, struct nb_warm_template out[NB_WARM_TEMPLATES_MAX],
                           char *err, size_t errlen)
{
    char tmp[NB_CONF_LIST], *save = NULL, *tok;
    int n = 0;
    snprintf(tmp, sizeof(tmp), "%s", spec);
    for (tok = strtok_r(tmp, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
        char *colon = strrchr(tok, ':'), *end = NULL;
        unsigned long want;
        size_t nl;
        if (colon == NULL || colon == tok || colon[1] == '\0') {
            snprintf(err, errlen, "warm_pool_template: \"%.100s\" is not name:count", tok);
            return -1;
        }
        *colon = '\0';
        nl = strlen(tok);
        want = strtoul(colon + 1, &end, 10);
        if (*end != '\0' || want > 256 || nl > 63 ||
            strspn(tok, "abcdefghijklmnopqrstuvwxyz0123456789._-") != nl || tok[0] == '.' ||
            tok[0] == '_' || tok[0] == '-') {
            snprintf(err, errlen,
                     "warm_pool_template: \"%.100s\" needs a template name (a-z, 0-9, . _ -) "
                     "and a count of at most 256",
                     tok);
            return -1;
        }
        if (n == NB_WARM_TEMPLATES_MAX) {
            snprintf(err, errlen, "warm_pool_template: at most %d templates",
                     NB_WARM_TEMPLATES_MAX);
            return -1;
        }
        snprintf(out[n].name, sizeof(out[n].name), "%s", tok);
        out[n].want = (unsigned)want;
        n++;
    }
    return n;
}

int nb_conf_image_allowed(const struct nb_conf *c, const char *image)
{
    for (unsigned i = 0; i < c->n_images; i++)
        if (!strcmp(c->images[i], image))
            return 1;
    return 0;
}
