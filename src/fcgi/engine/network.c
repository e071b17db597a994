/*
 * network.c - see network.h.
 *
 * The rules are written with iptables-restore --noflush: one input is one
 * transaction (iptables-nft commits it as one netlink batch, legacy under
 * the xtables lock), so a sandbox's chain is replaced, or created together
 * with its jump, or removed together with it, and no reader ever sees half.
 * "-g" (goto) is what lets a policy end in a plain RETURN: a chain entered
 * by goto returns to the chain that jumped to NBF, DOCKER-USER, so allowed
 * traffic goes on through Docker's own rules and nothing is ACCEPTed here.
 *
 * Fail closed: a source address on the bridge without a chain of its own
 * is rejected by NBS's last rule, so a container that exists before its
 * rules (or outlives them) reaches nothing. Docker never sees host traffic
 * in DOCKER-USER, hence INPUT; "host" means every address of the host,
 * including forwarders bound to 0.0.0.0 and Docker's published ports.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "json.h"
#include "log.h"
#include "network.h"

/* the kernel's answer to a refused packet: EHOSTUNREACH at once, no timeout */
#define REJECT "-j REJECT --reject-with icmp-admin-prohibited"
/* cap on what iptables prints (a listing of one bridge's sandbox jumps) */
#define TOOL_OUTPUT_MAX (1024 * 1024)
/* seconds iptables waits for the xtables lock */
#define TOOL_WAIT "10"
/* seconds a process trusts its last nb_network_ensure */
#define ENSURE_FRESH_S 10

static int64_t ensured_at; /* per process: when the base was last found whole */

/* Run a tool from /usr/sbin or /sbin with input on stdin; stdout+stderr into out. */
static int run_tool(const char *tool, const char *const args[], const char *input,
                    struct nb_buf *out)
{
    const char *dirs[] = {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"};
    char bin[64], *argv[16];
    int in[2], outp[2], status;
    size_t n = 0;
    pid_t pid;

    bin[0] = '\0';
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(bin, sizeof(bin), "%s%s", dirs[i], tool);
        if (access(bin, X_OK) == 0)
            break;
        bin[0] = '\0';
    }
    if (bin[0] == '\0') {
        nb_buf_printf(out, "%s is not installed", tool);
        return -1;
    }
    argv[n++] = bin;
    for (size_t i = 0; args[i] != NULL && n < sizeof(argv) / sizeof(argv[0]) - 1; i++)
        argv[n++] = (char *)(uintptr_t)args[i]; /* execv does not write them */
    argv[n] = NULL;

    if (pipe2(in, O_CLOEXEC) != 0)
        return nb_buf_printf(out, "pipe: %s", strerror(errno)), -1;
    if (pipe2(outp, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        return nb_buf_printf(out, "pipe: %s", strerror(errno)), -1;
    }
    pid = fork();
    if (pid == 0) {
        static char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
        char *envp[] = {path_env, NULL};
        sigset_t none;
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        sigaction(SIGPIPE, &sa, NULL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (dup2(in[0], 0) != 0 || dup2(outp[1], 1) != 1 || dup2(outp[1], 2) != 2)
            _exit(127);
        closefrom(3); /* the worker's sockets and the table stay with the worker */
        execve(bin, argv, envp);
        _exit(127);
    }
    close(in[0]);
    close(outp[1]);
    if (pid < 0) {
        close(in[1]);
        close(outp[0]);
        return nb_buf_printf(out, "fork: %s", strerror(errno)), -1;
    }
    /* inputs are a few KiB, well under a pipe's buffer, and read before any output */
    if (input != NULL) {
        size_t len = strlen(input), off = 0;
        while (off < len) {
            ssize_t w = write(in[1], input + off, len - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            off += (size_t)w;
        }
    }
    close(in[1]);
    for (;;) {
        char chunk[4096];
        ssize_t r = read(outp[0], chunk, sizeof(chunk));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        nb_buf_append_some(out, chunk, (size_t)r);
    }
    close(outp[0]);
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return nb_buf_printf(out, "waitpid: %s", strerror(errno)), -1;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* iptables-restore (or ip6tables-restore) --noflush of rules; -1 with a message. */
static int restore(const char *tool, const char *rules, char *err, size_t errlen)
{
    const char *args[] = {"-w", TOOL_WAIT, "--noflush", NULL};
    struct nb_buf out;
    int rc;
    nb_buf_init(&out, TOOL_OUTPUT_MAX);
    rc = run_tool(tool, args, rules, &out);
    if (rc != 0)
        snprintf(err, errlen, "%s: %.200s", tool, out.data ? out.data : "failed");
    nb_buf_free(&out);
    return rc;
}

/* iptables -w -S chain into out (its rules as "-A ..." lines); -1 if no such chain. */
static int list_chain(const char *tool, const char *chain, struct nb_buf *out)
{
    const char *args[] = {"-w", TOOL_WAIT, "-S", chain, NULL};
    return run_tool(tool, args, NULL, out);
}

/* Does tool have rule (an iptables argument list) in chain? */
static int has_rule(const char *tool, const char *chain, const char *const rule[])
{
    const char *args[16] = {"-w", TOOL_WAIT, "-C", chain};
    size_t n = 4;
    struct nb_buf out;
    int rc;
    for (size_t i = 0; rule[i] != NULL && n < 15; i++)
        args[n++] = rule[i];
    args[n] = NULL;
    nb_buf_init(&out, 4096);
    rc = run_tool(tool, args, NULL, &out);
    nb_buf_free(&out);
    return rc == 0;
}

static void chain_name(char *buf, size_t len, const char *prefix, const char *iface)
{
    snprintf(buf, len, "%s-%s", prefix, iface);
}

/* NBX-<the first 24 hex digits of id>: 28 characters, iptables's limit. */
static void sandbox_chain(char *buf, size_t len, const char *id)
{
    size_t n = snprintf(buf, len, "NBX-");
    for (const char *p = id; *p && n < 28 && n + 1 < len; p++)
        if (*p != '-')
            buf[n++] = *p;
    buf[n] = '\0';
}

static struct nb_netrule subnet_of(const struct nb_conf *c)
{
    struct nb_netrule sub = {0, 32, 0};
    char err[160];
    (void)nb_netrule_parse(c->bridge_subnet, &sub, err, sizeof(err)); /* checked at start */
    return sub;
}

void nb_network_addr(const struct nb_conf *c, uint32_t slot, char *buf, size_t len)
{
    struct nb_netrule sub = subnet_of(c);
    /* .0 is the network, .1 Docker's gateway (the host); conf.c checked the room */
    struct nb_netrule a = {sub.addr + 2 + slot, 32, 0};
    char text[NB_NETRULE_TEXT];
    nb_netrule_format(&a, text, sizeof(text));
    *strchr(text, '/') = '\0';
    snprintf(buf, len, "%s", text);
}

/* The network's gateway (.1): Docker's IPAM wants it said when the subnet is. */
static void gateway_addr(const struct nb_conf *c, char *buf, size_t len)
{
    struct nb_netrule sub = subnet_of(c), g = {sub.addr + 1, 32, 0};
    nb_netrule_format(&g, buf, len);
    *strchr(buf, '/') = '\0';
}

/* ---- the Docker network ---- */

/* The string at path under v, or "" when there is none. */
static const char *str_at(yajl_val v, const char **path)
{
    const char *s;
    v = yajl_tree_get(v, path, yajl_t_string);
    s = v != NULL ? YAJL_GET_STRING(v) : NULL;
    return s != NULL ? s : "";
}

/* Does the existing network carry our bridge name and subnet? */
static int network_matches(const char *iface, const char *subnet, const char *json, size_t len,
                           char *why, size_t whylen)
{
    const char *opt_path[] = {"Options", "com.docker.network.bridge.name", NULL};
    const char *icc_path[] = {"Options", "com.docker.network.bridge.enable_icc", NULL};
    const char *ipam_path[] = {"IPAM", "Config", NULL};
    yajl_val root = NULL, cfg;
    char err[128];
    int ok = 0;

    if (nb_json_parse(json, len, 16, &root, err, sizeof(err)) != 0 || root == NULL) {
        snprintf(why, whylen, "Docker's answer did not parse: %s", err);
        return 0;
    }
    if (strcmp(str_at(root, opt_path), iface) != 0) {
        snprintf(why, whylen, "its bridge is not %s", iface);
        goto out;
    }
    if (strcmp(str_at(root, icc_path), "false") != 0) {
        snprintf(why, whylen, "it allows inter-container traffic");
        goto out;
    }
    cfg = yajl_tree_get(root, ipam_path, yajl_t_array);
    if (cfg == NULL || YAJL_GET_ARRAY(cfg)->len != 1) {
        snprintf(why, whylen, "its IPAM config is not one subnet");
        goto out;
    }
    {
        const char *sub_path[] = {"Subnet", NULL};
        if (strcmp(str_at(YAJL_GET_ARRAY(cfg)->values[0], sub_path), subnet) != 0) {
            snprintf(why, whylen, "its subnet is not %s", subnet);
            goto out;
        }
    }
    ok = 1;
out:
    yajl_tree_free(root);
    return ok;
}

/* The Docker network name on bridge iface, subnet subnet (gateway gw): made if missing. */
static int ensure_named_network(struct nb_app *a, const char *name, const char *iface,
                                const char *subnet, const char *gw, struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    char path[128], why[160];
    struct nb_derr de = {0};
    struct nb_buf resp;
    long status = 0;
    yajl_gen g;
    char *body;
    int rc = -1;

    nb_buf_init(&resp, a->docker.max_response);
    snprintf(path, sizeof(path), "/networks/%s", name);
    if (nb_docker_request(&a->docker, "GET", path, NULL, 0, &status, &resp, &de) != 0) {
        nb_apierr_docker(ae, &de, "look up the sandbox network");
        goto out;
    }
    if (status == 200) {
        if (!network_matches(iface, subnet, resp.data ? resp.data : "", resp.len, why,
                             sizeof(why))) {
            nb_apierr_set(ae, NB_E_UNAVAILABLE, "network_unavailable",
                          "Docker network %s exists but %s: remove it (docker network rm %s) "
                          "or set bridge_network to another name",
                          name, why, name);
            goto out;
        }
        rc = 0;
        goto out;
    }
    if (status != 404) {
        nb_apierr_set(ae, NB_E_UPSTREAM, "docker_error",
                      "could not look up Docker network %s (status %ld)", name, status);
        goto out;
    }

    g = nb_json_gen();
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "Name", name);
    nb_json_kv_bool(g, "CheckDuplicate", 1);
    nb_json_kv_str(g, "Driver", "bridge");
    nb_json_kv_bool(g, "EnableIPv6", 0);
    nb_json_cstr(g, "IPAM");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "Driver", "default");
    nb_json_cstr(g, "Config");
    yajl_gen_array_open(g);
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "Subnet", subnet);
    nb_json_kv_str(g, "Gateway", gw);
    yajl_gen_map_close(g);
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    nb_json_cstr(g, "Options");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "com.docker.network.bridge.name", iface);
    /* Docker's own FORWARD rule drops bridge-to-bridge traffic; ours does too */
    nb_json_kv_str(g, "com.docker.network.bridge.enable_icc", "false");
    nb_json_kv_str(g, "com.docker.network.bridge.enable_ip_masquerade", "true");
    yajl_gen_map_close(g);
    nb_json_cstr(g, "Labels");
    yajl_gen_map_open(g);
    nb_json_kv_str(g, "nanobox.instance", c->instance);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    body = nb_json_gen_take(g);
    nb_buf_reset(&resp);
    snprintf(path, sizeof(path), "/networks/create");
    if (nb_docker_request(&a->docker, "POST", path, body, 0, &status, &resp, &de) != 0) {
        nb_apierr_docker(ae, &de, "create the sandbox network");
    } else if (status == 201 || status == 409) { /* 409: another process made it first */
        nb_info("Docker network %s (bridge %s, %s) %s", name, iface, subnet,
                status == 201 ? "created" : "already there");
        rc = 0;
    } else {
        /* another process may have made it meanwhile: Docker then says its pool overlaps */
        char err[300];
        long st2 = 0;
        snprintf(err, sizeof(err), "%.200s", resp.data ? resp.data : "");
        nb_buf_reset(&resp);
        snprintf(path, sizeof(path), "/networks/%s", name);
        if (nb_docker_request(&a->docker, "GET", path, NULL, 0, &st2, &resp, &de) == 0 &&
            st2 == 200 &&
            network_matches(iface, subnet, resp.data ? resp.data : "", resp.len, why, sizeof(why)))
            rc = 0;
        else
            nb_apierr_set(ae, NB_E_UNAVAILABLE, "network_unavailable",
                          "could not create Docker network %s: %s", name, err);
    }
    free(body);
out:
    nb_buf_free(&resp);
    return rc;
}

static int ensure_docker_network(struct nb_app *a, struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    char gw[24];
    gateway_addr(c, gw, sizeof(gw));
    return ensure_named_network(a, c->bridge_network, c->bridge_interface, c->bridge_subnet, gw,
                                ae);
}

/* ---- the base rules ---- */

/* The jump from a built-in chain into ours, at its top, once. */
static int ensure_jump(const char *tool, const char *from, const char *iface, const char *to,
                       char *err, size_t errlen)
{
    const char *rule[] = {"-i", iface, "-j", to, NULL};
    char rules[256], restorer[32];
    if (has_rule(tool, from, rule))
        return 0;
    snprintf(restorer, sizeof(restorer), "%s-restore", tool);
    snprintf(rules, sizeof(rules), "*filter\n-I %s 1 -i %s -j %s\nCOMMIT\n", from, iface, to);
    return restore(restorer, rules, err, errlen);
}

static int ensure_rules(const struct nb_conf *c, char *err, size_t errlen)
{
    const char *ifc = c->bridge_interface;
    char nbf[32], nbi[32], nbs[32], nb6[32], rules[1024];
    struct nb_buf out;
    int have_nbs, rc;

    chain_name(nbf, sizeof(nbf), "NBF", ifc);
    chain_name(nbi, sizeof(nbi), "NBI", ifc);
    chain_name(nbs, sizeof(nbs), "NBS", ifc);
    chain_name(nb6, sizeof(nb6), "NB6", ifc);
    /*
     * NBS holds the sandboxes' jumps, so it is made only when missing: "-N"
     * in a transaction of its own fails as a whole when the chain exists,
     * so two processes racing here cannot empty each other's NBS, and it
     * never exists without its final REJECT. NBF and NBI hold nothing per
     * sandbox: declaring them flushes and refills them in one transaction,
     * which also repairs them.
     */
    snprintf(rules, sizeof(rules), "*filter\n-N %s\n-A %s %s\nCOMMIT\n", nbs, nbs, REJECT);
    if (restore("iptables-restore", rules, err, errlen) != 0) {
        nb_buf_init(&out, TOOL_OUTPUT_MAX);
        have_nbs = list_chain("iptables", nbs, &out) == 0;
        nb_buf_free(&out);
        if (!have_nbs)
            return -1; /* err says why it could not be made */
    }
    snprintf(rules, sizeof(rules),
             "*filter\n:%s - [0:0]\n:%s - [0:0]\n"
             "-A %s -o %s %s\n"
             "-A %s -d 169.254.0.0/16 %s\n"
             "-A %s -g %s\n"
             "-A %s %s\n"
             "COMMIT\n",
             nbf, nbi, nbf, ifc, REJECT, nbf, REJECT, nbf, nbs, nbi, REJECT);
    if (restore("iptables-restore", rules, err, errlen) != 0)
        return -1;
    if (ensure_jump("iptables", "DOCKER-USER", ifc, nbf, err, errlen) != 0 ||
        ensure_jump("iptables", "INPUT", ifc, nbi, err, errlen) != 0)
        return -1;
    /* the network has no IPv6, but link-local addresses appear on its ports anyway */
    snprintf(rules, sizeof(rules), "*filter\n:%s - [0:0]\n-A %s -j DROP\nCOMMIT\n", nb6, nb6);
    rc = restore("ip6tables-restore", rules, err, errlen);
    if (rc == 0)
        rc = ensure_jump("ip6tables", "INPUT", ifc, nb6, err, errlen);
    if (rc == 0)
        rc = ensure_jump("ip6tables", "FORWARD", ifc, nb6, err, errlen);
    if (rc != 0) {
        nb_warn("IPv6 rules for %s not installed (%s); IPv4 rules are", ifc, err);
        err[0] = '\0';
    }
    return 0;
}

int nb_network_ensure(struct nb_app *a, struct nb_apierr *ae)
{
    char err[256];
    int64_t now = nb_clock_mono_s();
    if (ensured_at != 0 && now - ensured_at < ENSURE_FRESH_S)
        return 0;
    if (ensure_docker_network(a, ae) != 0)
        return -1;
    if (ensure_rules(&a->conf, err, sizeof(err)) != 0) {
        nb_apierr_set(
            ae, NB_E_UNAVAILABLE, "network_unavailable",
            "the sandbox network's kernel rules could not be installed (nanobox-fcgi needs "
            "root and iptables): %s",
            err);
        return -1;
    }
    ensured_at = now;
    return 0;
}

/* ---- policies ---- */

/* Never reachable from a sandbox, whatever the lists say. */
static int never_reachable(const struct nb_conf *c, const struct nb_netrule *r)
{
    struct nb_netrule ll = {0xa9fe0000u, 16, 0}, sub = subnet_of(c);
    return nb_netrule_overlaps(r, &ll) || nb_netrule_overlaps(r, &sub);
}

int nb_network_policy_check(const struct nb_conf *c, const struct nb_net_policy *p,
                            struct nb_apierr *ae)
{
    struct nb_netrules deny, widen;
    char err[160], text[NB_NETRULE_TEXT];

    nb_netrules_parse_list(c->egress_deny, &deny, err, sizeof(err)); /* checked at start */
    nb_netrules_parse_list(c->egress_widen, &widen, err, sizeof(err));
    for (unsigned i = 0; i < p->allow.n; i++) {
        const struct nb_netrule *r = &p->allow.r[i];
        int ok = 1;
        nb_netrule_format(r, text, sizeof(text));
        if (never_reachable(c, r)) {
            nb_apierr_set(ae, NB_E_FORBIDDEN, "forbidden",
                          "allow \"%s\": the sandbox network and 169.254.0.0/16 "
                          "are never reachable from a sandbox",
                          text);
            return -1;
        }
        for (unsigned j = 0; j < deny.n && ok; j++)
            ok = !nb_netrule_overlaps(r, &deny.r[j]);
        for (unsigned j = 0; j < widen.n && !ok; j++)
            ok = nb_netrule_within(r, &widen.r[j]);
        if (!ok) {
            nb_apierr_set(ae, NB_E_FORBIDDEN, "forbidden",
                          "allow \"%s\" opens what the operator denies "
                          "(egress_deny) and egress_widen does not let a request open",
                          text);
            return -1;
        }
    }
    return 0;
}

/* "-A chain -d net [-p proto --dport port] target" lines for each rule of l. */
static void policy_lines(struct nb_buf *b, const char *chain, const struct nb_netrules *l,
                         const char *target)
{
    for (unsigned i = 0; i < l->n; i++) {
        char net[NB_NETRULE_TEXT];
        struct nb_netrule r = l->r[i];
        r.port = 0;
        nb_netrule_format(&r, net, sizeof(net));
        if (l->r[i].port == 0) {
            nb_buf_printf(b, "-A %s -d %s %s\n", chain, net, target);
        } else {
            nb_buf_printf(b, "-A %s -d %s -p tcp --dport %u %s\n", chain, net, l->r[i].port,
                          target);
            nb_buf_printf(b, "-A %s -d %s -p udp --dport %u %s\n", chain, net, l->r[i].port,
                          target);
        }
    }
}

/* ---- the builds' network ---- */

int nb_network_build_ensure(struct nb_app *a, char *net, size_t netlen, struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_netrule sub = {0, 32, 0}, g;
    struct nb_netrules op_allow, op_deny;
    char ifc[16], gw[NB_NETRULE_TEXT], nbf[32], nbi[32], nb6[32], err[256];
    struct nb_buf rules;
    int rc = -1;

    snprintf(net, netlen, "%.100s-build", c->bridge_network);
    snprintf(ifc, sizeof(ifc), "%.14sb", c->bridge_interface);
    (void)nb_netrule_parse(c->template_subnet, &sub, err, sizeof(err)); /* checked at start */
    g = (struct nb_netrule){sub.addr + 1, 32, 0};
    nb_netrule_format(&g, gw, sizeof(gw));
    *strchr(gw, '/') = '\0';
    if (ensure_named_network(a, net, ifc, c->template_subnet, gw, ae) != 0)
        return -1;
    nb_netrules_parse_list(c->egress_allow, &op_allow, err, sizeof(err)); /* checked at start */
    nb_netrules_parse_list(c->egress_deny, &op_deny, err, sizeof(err));
    chain_name(nbf, sizeof(nbf), "NBF", ifc);
    chain_name(nbi, sizeof(nbi), "NBI", ifc);
    chain_name(nb6, sizeof(nb6), "NB6", ifc);
    /*
     * A bridge sandbox's rules with no request of its own: nothing on the
     * bridge itself (other build steps), not 169.254.0.0/16 nor the
     * sandboxes' network, then the operator's allow and deny; the host
     * (INPUT) never. Declared whole in one transaction: made, or repaired.
     */
    nb_buf_init(&rules, TOOL_OUTPUT_MAX);
    nb_buf_printf(&rules,
                  "*filter\n:%s - [0:0]\n:%s - [0:0]\n"
                  "-A %s -o %s %s\n"
                  "-A %s -d 169.254.0.0/16 %s\n"
                  "-A %s -d %s %s\n",
                  nbf, nbi, nbf, ifc, REJECT, nbf, REJECT, nbf, c->bridge_subnet, REJECT);
    policy_lines(&rules, nbf, &op_allow, "-j RETURN");
    policy_lines(&rules, nbf, &op_deny, REJECT);
    nb_buf_printf(&rules, "-A %s %s\nCOMMIT\n", nbi, REJECT);
    if (restore("iptables-restore", rules.data, err, sizeof(err)) != 0 ||
        ensure_jump("iptables", "DOCKER-USER", ifc, nbf, err, sizeof(err)) != 0 ||
        ensure_jump("iptables", "INPUT", ifc, nbi, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_UNAVAILABLE, "network_unavailable",
                      "the builds' network rules could not be installed (nanobox-fcgi needs "
                      "root and iptables): %s",
                      err);
        goto out;
    }
    nb_buf_reset(&rules);
    nb_buf_printf(&rules, "*filter\n:%s - [0:0]\n-A %s -j DROP\nCOMMIT\n", nb6, nb6);
    if (restore("ip6tables-restore", rules.data, err, sizeof(err)) != 0 ||
        ensure_jump("ip6tables", "INPUT", ifc, nb6, err, sizeof(err)) != 0 ||
        ensure_jump("ip6tables", "FORWARD", ifc, nb6, err, sizeof(err)) != 0)
        nb_warn("IPv6 rules for %s not installed (%s); IPv4 rules are", ifc, err);
    rc = 0;
out:
    nb_buf_free(&rules);
    return rc;
}

/* Is "-g chain" in NBS's listing? */
static int listed(const struct nb_buf *nbs, const char *chain)
{
    char needle[48];
    snprintf(needle, sizeof(needle), " -g %s\n", chain);
    return nbs->data != NULL && strstr(nbs->data, needle) != NULL;
}

int nb_network_apply(struct nb_app *a, const char *id, uint32_t slot, const struct nb_net_policy *p,
                     struct nb_apierr *ae)
{
    const struct nb_conf *c = &a->conf;
    struct nb_netrules op_allow, op_deny;
    char nbs[32], chain[32], addr[24], err[256];
    struct nb_buf rules, list;
    int rc = -1;

    if (nb_network_ensure(a, ae) != 0)
        return -1;
    nb_netrules_parse_list(c->egress_allow, &op_allow, err, sizeof(err)); /* checked at start */
    nb_netrules_parse_list(c->egress_deny, &op_deny, err, sizeof(err));
    chain_name(nbs, sizeof(nbs), "NBS", c->bridge_interface);
    sandbox_chain(chain, sizeof(chain), id);
    nb_network_addr(c, slot, addr, sizeof(addr));

    nb_buf_init(&list, TOOL_OUTPUT_MAX);
    nb_buf_init(&rules, TOOL_OUTPUT_MAX);
    if (list_chain("iptables", nbs, &list) != 0) {
        nb_apierr_set(ae, NB_E_UNAVAILABLE, "network_unavailable", "chain %s is missing: %.200s",
                      nbs, list.data ? list.data : "");
        goto out;
    }
    /*
     * First match wins: the request's allow, its deny, the operator's allow,
     * the operator's deny; what is left is allowed. The hard rules (other
     * sandboxes, 169.254.0.0/16, the host) come before, in NBF and NBI.
     */
    nb_buf_printf(&rules, "*filter\n:%s - [0:0]\n",
                  chain); /* made, or emptied, in this transaction */
    policy_lines(&rules, chain, &p->allow, "-j RETURN");
    policy_lines(&rules, chain, &p->deny, REJECT);
    policy_lines(&rules, chain, &op_allow, "-j RETURN");
    policy_lines(&rules, chain, &op_deny, REJECT);
    if (!listed(&list, chain))
        nb_buf_printf(&rules, "-I %s 1 -s %s/32 -g %s\n", nbs, addr, chain);
    nb_buf_printf(&rules, "COMMIT\n");
    if (restore("iptables-restore", rules.data, err, sizeof(err)) != 0) {
        nb_apierr_set(ae, NB_E_UNAVAILABLE, "network_unavailable",
                      "could not install the egress rules of %s: %s", id, err);
        goto out;
    }
    nb_debug("egress rules of %s (%s) installed", id, addr);
    rc = 0;
out:
    nb_buf_free(&rules);
    nb_buf_free(&list);
    return rc;
}

int nb_network_set_policy(struct nb_app *a, const char *id, const struct nb_net_policy *p,
                          struct nb_apierr *ae)
{
    struct nb_slot *s;
    uint32_t slot = 0, gen = 0;
    int found = 0, bridge = 0, same = 0;

    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    if (s != NULL && s->state == NB_SLOT_RUNNING && s->expires > nb_clock_real_s()) {
        found = 1;
        bridge = s->network_bridge != 0;
        slot = (uint32_t)(s - a->table.slots);
        gen = s->generation;
    }
    nb_table_unlock(&a->table);
    if (!found) {
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found",
                      "no sandbox %s (it may have expired or been destroyed)", id);
        return -1;
    }
    if (!bridge) {
        nb_apierr_set(ae, NB_E_CONFLICT, "not_bridge",
                      "sandbox %s has no network (it was created with network "
                      "\"none\"); a policy applies to bridge sandboxes only",
                      id);
        return -1;
    }
    if (nb_network_apply(a, id, slot, p, ae) != 0)
        return -1;
    /* destroyed while we wrote: its removal may have come first, so undo ours */
    nb_table_lock(&a->table);
    s = nb_table_find(&a->table, id);
    same = s != NULL && s->generation == gen && s->state == NB_SLOT_RUNNING;
    nb_table_unlock(&a->table);
    if (!same) {
        nb_network_remove(a, id);
        nb_apierr_set(ae, NB_E_NOT_FOUND, "not_found",
                      "sandbox %s went away while its policy changed", id);
        return -1;
    }
    return 0;
}

/* Remove the jump line (an "-A NBS ..." of the listing) and the chain it names. */
static int remove_listed(const char *line, size_t len, const char *chain)
{
    char rules[512], err[256];
    if (len < 3 || len > 300)
        return -1;
    snprintf(rules, sizeof(rules), "*filter\n-D%.*s\n-F %s\n-X %s\nCOMMIT\n", (int)(len - 2),
             line + 2, chain, chain);
    if (restore("iptables-restore", rules, err, sizeof(err)) != 0) {
        nb_warn("could not remove chain %s: %s", chain, err);
        return -1;
    }
    return 0;
}

/*
 * Call fn for each "-A NBS-IF ... -g NBX-..." line of the listing; fn gets
 * the line and the chain name it jumps to.
 */
static int each_jump(struct nb_app *a,
                     int (*fn)(struct nb_app *, const char *, size_t, const char *, void *),
                     void *arg)
{
    char nbs[32];
    struct nb_buf list;
    const char *p;
    int n = 0;

    chain_name(nbs, sizeof(nbs), "NBS", a->conf.bridge_interface);
    nb_buf_init(&list, TOOL_OUTPUT_MAX);
    if (list_chain("iptables", nbs, &list) != 0) {
        nb_buf_free(&list);
        return -1;
    }
    for (p = list.data; p != NULL && *p;) {
        const char *eol = strchr(p, '\n'), *g;
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char chain[32];
        g = memmem(p, len, " -g NBX-", 8);
        if (g != NULL && strncmp(p, "-A ", 3) == 0) {
            size_t cl = len - (size_t)(g + 4 - p);
            if (cl < sizeof(chain)) {
                memcpy(chain, g + 4, cl);
                chain[cl] = '\0';
                n += fn(a, p, len, chain, arg);
            }
        }
        p = eol ? eol + 1 : p + len;
    }
    nb_buf_free(&list);
    return n;
}

static int remove_if_named(struct nb_app *a, const char *line, size_t len, const char *chain,
                           void *arg)
{
    (void)a;
    return strcmp(chain, (const char *)arg) == 0 && remove_listed(line, len, chain) == 0;
}

int nb_network_remove(struct nb_app *a, const char *id)
{
    char chain[32];
    sandbox_chain(chain, sizeof(chain), id);
    if (each_jump(a, remove_if_named, chain) < 0)
        return -1;
    nb_debug("egress rules of %s removed", id);
    return 0;
}

static int remove_if_orphan(struct nb_app *a, const char *line, size_t len, const char *chain,
                            void *arg)
{
    int owned = 0;
    (void)arg;
    nb_table_lock(&a->table);
    for (uint32_t i = 0; i < a->table.nslots && !owned; i++) {
        const struct nb_slot *s = &a->table.slots[i];
        char mine[32];
        if (s->state == NB_SLOT_FREE)
            continue;
        sandbox_chain(mine, sizeof(mine), s->id);
        owned = strcmp(mine, chain) == 0;
    }
    nb_table_unlock(&a->table);
    if (owned || remove_listed(line, len, chain) != 0)
        return 0;
    nb_info("removed egress rules %s: their sandbox is gone", chain);
    return 1;
}

int nb_network_reconcile(struct nb_app *a)
{
    return each_jump(a, remove_if_orphan, NULL);
}
