/*
 * isolation.c - see isolation.h.
 *
 * Everything here runs once, in the master at start, and writes files
 * that containers bind-mount read-only: the workers only compute names.
 * Files are replaced by rename, never rewritten in place: a running
 * container keeps the inode it mounted, so replacing the agent under a
 * live sandbox is safe.
 *
 * The root filesystem of a sandbox is read-only and its uid is not the
 * image's, so the image's /etc/passwd cannot name it: each slot gets a
 * passwd and group of nanobox's own (root, nobody, and the sandbox user
 * with the configured name, the slot's uid and the workspace as home),
 * mounted over the image's. They live in the sandbox directory, a path of
 * nanobox's that says nothing about where nanobox was built or checked
 * out: that path is what /proc/self/mountinfo shows inside.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "helper.h"
#include "isolation.h"
#include "json.h"
#include "log.h"
#include "procstat.h"
#include "table.h"

/* The biggest seccomp profile we read: Docker's own is about 20 KiB. */
#define NB_SECCOMP_MAX (256 * 1024)

int nb_isolation_per_slot(const struct nb_conf *c)
{
    return c->sandbox_uid_base != 0;
}

void nb_isolation_ids(const struct nb_conf *c, uint32_t slot, unsigned long *uid,
                      unsigned long *gid)
{
    char *end;
    if (nb_isolation_per_slot(c)) {
        *uid = *gid = (unsigned long)c->sandbox_uid_base + slot;
        return;
    }
    /* nb_conf_check made sure it is "uid" or "uid:gid" */
    *uid = strtoul(c->sandbox_user, &end, 10);
    *gid = *end == ':' ? strtoul(end + 1, NULL, 10) : *uid;
}

/* The sandbox directory: configured, else "sandbox" next to the state file. */
static void sandbox_dir(const struct nb_conf *c, char *out, size_t outlen)
{
    const char *slash;
    if (c->sandbox_dir[0]) {
        snprintf(out, outlen, "%s", c->sandbox_dir);
        return;
    }
    slash = strrchr(c->state_file, '/');
    if (slash == NULL)
        snprintf(out, outlen, "sandbox");
    else if (slash == c->state_file)
        snprintf(out, outlen, "/sandbox");
    else
        snprintf(out, outlen, "%.*s/sandbox", (int)(slash - c->state_file), c->state_file);
}

void nb_isolation_path(const struct nb_conf *c, const char *file, uint32_t slot, char *out,
                       size_t outlen)
{
    char dir[PATH_MAX];
    sandbox_dir(c, dir, sizeof(dir));
    if (!strcmp(file, "nanobox-init") || !strcmp(file, "kernel") || !strcmp(file, "hosts") ||
        !strcmp(file, "resolv.conf") || !strcmp(file, "templates") || !strcmp(file, "home"))
        snprintf(out, outlen, "%s/%s", dir, file);
    else
        snprintf(out, outlen, "%s/slots/%u/%s", dir, (unsigned)slot, file);
}

/* Does [lo, lo + n) meet a range of /etc/subuid or /etc/subgid (name:start:count)? */
static int subid_overlap(const char *path, unsigned long lo, unsigned long n, char *who,
                         size_t wholen)
{
    FILE *f = fopen(path, "re");
    char line[512];
    int hit = 0;
    if (f == NULL)
        return 0;
    while (!hit && fgets(line, sizeof(line), f) != NULL) {
        char *c1 = strchr(line, ':'), *c2, *end;
        unsigned long start, count;
        if (c1 == NULL || (c2 = strchr(c1 + 1, ':')) == NULL)
            continue;
        start = strtoul(c1 + 1, &end, 10);
        if (end != c2)
            continue;
        count = strtoul(c2 + 1, NULL, 10);
        if (start < lo + n && lo < start + count) {
            snprintf(who, wholen, "%s (%.*s: %lu-%lu)", path, (int)(c1 - line), line, start,
                     start + count - 1);
            hit = 1;
        }
    }
    fclose(f);
    return hit;
}

/*
 * A uid the host knows would share its per-user limits (and its files'
 * ownership) with a sandbox: refuse to start rather than skip, so that a
 * slot's uid stays base + slot and the operator picks a free range once.
 */
static int check_uid_range(const struct nb_conf *c, uint32_t nslots, char *err, size_t errlen)
{
    unsigned long lo = c->sandbox_uid_base, hi = lo + nslots - 1;
    char who[PATH_MAX + 64] = "";
    struct passwd *pw;
    struct group *gr;

    setpwent();
    while ((pw = getpwent()) != NULL) {
        if (pw->pw_uid >= lo && pw->pw_uid <= hi) {
            snprintf(who, sizeof(who), "user %s (uid %lu)", pw->pw_name, (unsigned long)pw->pw_uid);
            break;
        }
    }
    endpwent();
    if (who[0] == '\0') {
        setgrent();
        while ((gr = getgrent()) != NULL) {
            if (gr->gr_gid >= lo && gr->gr_gid <= hi) {
                snprintf(who, sizeof(who), "group %s (gid %lu)", gr->gr_name,
                         (unsigned long)gr->gr_gid);
                break;
            }
        }
        endgrent();
    }
    if (who[0] == '\0' && !subid_overlap("/etc/subuid", lo, nslots, who, sizeof(who)))
        subid_overlap("/etc/subgid", lo, nslots, who, sizeof(who));
    if (who[0] != '\0') {
        snprintf(err, errlen,
                 "sandbox uids %lu-%lu (sandbox_uid_base + one per slot) include the host's %s: "
                 "set sandbox_uid_base to a range no host user, group or subordinate id uses",
                 lo, hi, who);
        return -1;
    }
    return 0;
}

/* Write len bytes to path through path.tmp and a rename. */
static int write_file(const char *path, const void *data, size_t len, mode_t mode, char *err,
                      size_t errlen)
{
    char tmp[PATH_MAX + 8];
    const char *p = data;
    int fd;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0) {
        snprintf(err, errlen, "create %s: %s", tmp, strerror(errno));
        return -1;
    }
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(err, errlen, "write %s: %s", tmp, n < 0 ? strerror(errno) : "short write");
            close(fd);
            unlink(tmp);
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    /* open's mode went through the umask */
    if (fchmod(fd, mode) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        snprintf(err, errlen, "install %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Read a whole file of at most cap bytes into a NUL-terminated buffer. */
static char *read_file(const char *path, size_t cap, size_t *lenp, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    char *buf;
    size_t len = 0;

    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > cap) {
        snprintf(err, errlen, "%s: not a regular file of at most %zu bytes", path, cap);
        close(fd);
        return NULL;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL)
        abort();
    while (len < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (len != (size_t)st.st_size) {
        snprintf(err, errlen, "%s: short read", path);
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    *lenp = len;
    return buf;
}

static int make_dir(const char *path, char *err, size_t errlen)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "mkdir %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/*
 * Copy the agent the configuration or the build names to the sandbox
 * directory: containers mount this copy, so the checkout or build path
 * never appears inside a sandbox.
 */
static int install_agent(const struct nb_conf *c, char *err, size_t errlen)
{
    char src[PATH_MAX], dst[PATH_MAX], msg[PATH_MAX + 64];
    char *bin;
    size_t len;
    int rc;

    nb_helper_path(c->init_path, "nanobox-init", NB_LIBEXECDIR "/nanobox-init", src, sizeof(src));
    nb_isolation_path(c, "nanobox-init", 0, dst, sizeof(dst));
    bin = read_file(src, 64UL * 1024 * 1024, &len, msg, sizeof(msg));
    if (bin == NULL) {
        snprintf(err, errlen, "the agent nanobox-init: %s (set init_path?)", msg);
        return -1;
    }
    rc = write_file(dst, bin, len, 0755, err, errlen);
    free(bin);
    return rc;
}

/* Is name a regular file in dir (not a dot file)? */
static int dir_has_file(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat st;

    if (name[0] == '.' || snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        return 0;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/*
 * Copy the code bridge's files (bridge.py, jsrunner.js) from kernel_dir,
 * else from "kernel" next to this executable (a build tree links it to
 * src/kernel), else from the installed $(pkgdatadir)/kernel, into
 * <sandbox_dir>/kernel, which every sandbox mounts at /.nanobox/kernel.
 * Afterwards that directory holds exactly the source's files: one left
 * from an older nanobox would run in new sandboxes. The directory itself
 * is mounted, so live sandboxes see the new files too (a bridge already
 * running keeps the code it loaded). No source directory
 * is not an error: sandboxes are made as ever and the agent answers the
 * code bridge's request (K) with ENOEXEC.
 */
static int install_kernel(const struct nb_conf *c, char *err, size_t errlen)
{
    /* a directory entry name is at most 255 bytes */
    char src[PATH_MAX], dst[PATH_MAX], from[PATH_MAX + 257], to[PATH_MAX + 257];
    char msg[PATH_MAX + 320];
    DIR *d;
    struct dirent *de;
    unsigned copied = 0;

    nb_helper_data_path(c->kernel_dir, "kernel", NB_PKGDATADIR "/kernel", src, sizeof(src));
    nb_isolation_path(c, "kernel", 0, dst, sizeof(dst));
    if (make_dir(dst, err, errlen) != 0)
        return -1;
    d = opendir(src);
    if (d == NULL) {
        nb_warn("no code bridge in %s (%s): sandboxes have no code interpreter (set kernel_dir?)",
                src, strerror(errno));
    } else {
        while ((de = readdir(d)) != NULL) {
            char *data;
            size_t len;
            int rc;
            if (!dir_has_file(src, de->d_name))
                continue;
            snprintf(from, sizeof(from), "%s/%s", src, de->d_name);
            snprintf(to, sizeof(to), "%s/%s", dst, de->d_name);
            data = read_file(from, 16UL * 1024 * 1024, &len, msg, sizeof(msg));
            if (data == NULL) {
                snprintf(err, errlen, "the code bridge: %s (set kernel_dir?)", msg);
                closedir(d);
                return -1;
            }
            rc = write_file(to, data, len, 0644, err, errlen);
            free(data);
            if (rc != 0) {
                closedir(d);
                return -1;
            }
            copied++;
        }
        closedir(d);
    }
    /* What the source no longer has (or never had: a .tmp left by a crash) goes. */
    d = opendir(dst);
    if (d == NULL) {
        snprintf(err, errlen, "%s: %s", dst, strerror(errno));
        return -1;
    }
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || dir_has_file(src, de->d_name))
            continue;
        snprintf(to, sizeof(to), "%s/%s", dst, de->d_name);
        if (unlink(to) != 0 && errno != ENOENT && errno != EISDIR) {
            snprintf(err, errlen, "remove %s: %s", to, strerror(errno));
            closedir(d);
            return -1;
        }
    }
    closedir(d);
    if (copied > 0)
        nb_info("sandboxes get the code bridge from %s (%u files)", src, copied);
    return 0;
}

/* The slot's directory, made (with its parents) if missing. */
static int slot_dir(const struct nb_conf *c, uint32_t slot, char *err, size_t errlen)
{
    char path[PATH_MAX];
    char *p;

    nb_isolation_path(c, "", slot, path, sizeof(path));
    path[strlen(path) - 1] = '\0';
    if (mkdir(path, 0755) == 0 || errno == EEXIST)
        return 0;
    /* sandbox_dir/slots/<slot>: two levels up at most */
    for (p = strchr(path + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "mkdir %s: %s", path, strerror(errno));
            return -1;
        }
        *p = '/';
    }
    return make_dir(path, err, errlen);
}

/* A slot's passwd and group (suffix "" or "-e2b") naming its uid name, home home. */
static int write_users(const struct nb_conf *c, uint32_t slot, const char *suffix, const char *name,
                       const char *home, char *err, size_t errlen)
{
    char path[PATH_MAX], file[32], text[1024];
    unsigned long uid, gid;
    int n;

    nb_isolation_ids(c, slot, &uid, &gid);
    n = snprintf(text, sizeof(text),
                 "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                 "%s:x:%lu:%lu:nanobox sandbox:%s:/bin/sh\n"
                 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
                 name, uid, gid, home);
    snprintf(file, sizeof(file), "passwd%s", suffix);
    nb_isolation_path(c, file, slot, path, sizeof(path));
    if (write_file(path, text, (size_t)n, 0644, err, errlen) != 0)
        return -1;
    /* tty: the group of /dev/pts/N (devpts gid=5) */
    n = snprintf(text, sizeof(text), "root:x:0:\ntty:x:5:\n%s:x:%lu:\nnogroup:x:65534:\n", name,
                 gid);
    snprintf(file, sizeof(file), "group%s", suffix);
    nb_isolation_path(c, file, slot, path, sizeof(path));
    return write_file(path, text, (size_t)n, 0644, err, errlen);
}

static int write_slot_files(const struct nb_conf *c, uint32_t slot, char *err, size_t errlen)
{
    if (slot_dir(c, slot, err, errlen) != 0)
        return -1;
    if (!nb_isolation_per_slot(c))
        return 0; /* the image's passwd names sandbox_user */
    if (write_users(c, slot, "", c->sandbox_user_name, c->workspace, err, errlen) != 0)
        return -1;
    /* E2B's layout: /home/<name> is the user's name and home */
    return !nb_isolation_e2b_layout(c)
               ? 0
               : write_users(c, slot, "-e2b", c->e2b_home + 6, c->e2b_home, err, errlen);
}

int nb_isolation_set_hostname(const struct nb_conf *c, uint32_t slot, const char *hostname,
                              char *err, size_t errlen)
{
    char path[PATH_MAX], text[128];
    int n;

    if (slot_dir(c, slot, err, errlen) != 0)
        return -1;
    n = snprintf(text, sizeof(text), "%s\n", hostname);
    nb_isolation_path(c, "hostname", slot, path, sizeof(path));
    return write_file(path, text, (size_t)n, 0644, err, errlen);
}

/*
 * The hosts and resolv.conf of a sandbox without network. Docker's would
 * be the host's resolv.conf (its name servers and search domains) from
 * /var/lib/docker/containers/<id>/: neither says anything a sandbox
 * without network can use.
 */
static int write_net_files(const struct nb_conf *c, char *err, size_t errlen)
{
    static const char hosts[] = "127.0.0.1\tlocalhost\n"
                                "::1\tlocalhost ip6-localhost ip6-loopback\n";
    static const char resolv[] = "# no network (NetworkMode none): no name server\n";
    char path[PATH_MAX];

    nb_isolation_path(c, "hosts", 0, path, sizeof(path));
    if (write_file(path, hosts, sizeof(hosts) - 1, 0644, err, errlen) != 0)
        return -1;
    nb_isolation_path(c, "resolv.conf", 0, path, sizeof(path));
    return write_file(path, resolv, sizeof(resolv) - 1, 0644, err, errlen);
}

int nb_isolation_home_link(const struct nb_conf *c)
{
    return c->e2b_home[0] != '\0' && strcmp(c->e2b_home, c->workspace) != 0;
}

int nb_isolation_e2b_layout(const struct nb_conf *c)
{
    return c->e2b_user_home && nb_isolation_home_link(c);
}

const char *nb_isolation_workspace(const struct nb_conf *c, unsigned lifecycle)
{
    return lifecycle & NB_LIFE_E2B_HOME ? c->e2b_home : c->workspace;
}

/*
 * E2B's home: the directory mounted read-only as the sandboxes' /home,
 * with one entry, e2b_home's name, a symlink to the workspace (resolved
 * inside the sandbox, by the sandbox: the host never follows it). Made
 * by rename, so a running sandbox sees the old link or the new one.
 */
static int write_home(const struct nb_conf *c, char *err, size_t errlen)
{
    char dir[PATH_MAX], link[PATH_MAX + 8], tmp[PATH_MAX + 16];

    if (!nb_isolation_home_link(c))
        return 0;
    nb_isolation_path(c, "home", 0, dir, sizeof(dir));
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "mkdir %s: %s", dir, strerror(errno));
        return -1;
    }
    snprintf(link, sizeof(link), "%s/%s", dir, c->e2b_home + 6); /* after "/home/" */
    snprintf(tmp, sizeof(tmp), "%s.tmp", link);
    unlink(tmp);
    if (symlink(c->workspace, tmp) != 0 || rename(tmp, link) != 0) {
        snprintf(err, errlen, "link %s: %s", link, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/*
 * Every devpts but the host's first shares kernel.pty.max minus
 * kernel.pty.reserve: a full table of sandboxes each at its max could leave
 * the last ones none. kernel.pty.max is only a ceiling (a pty costs memory
 * when opened, not before), so it is raised to fit, as far as the kernel
 * allows; where it cannot be (not root, a read-only /proc/sys), a warning.
 */
#define PTY_MAX_KERNEL 1048576UL /* NR_UNIX98_PTY_MAX: the most kernel.pty.max takes */
static void check_ptys(const struct nb_conf *c, uint32_t nslots)
{
    const char *path = "/proc/sys/kernel/pty/max";
    unsigned long max = nb_proc_number(path, "", 4096);
    unsigned long reserve = nb_proc_number("/proc/sys/kernel/pty/reserve", "", 1024);
    unsigned long want = (unsigned long)nslots * c->sandbox_ptys, raise = want + reserve;
    FILE *f;

    if (max > reserve && want <= max - reserve)
        return;
    if (raise <= PTY_MAX_KERNEL && (f = fopen(path, "we")) != NULL) {
        int ok = fprintf(f, "%lu\n", raise) > 0;
        if (fclose(f) == 0 && ok && nb_proc_number(path, "", 0) == raise) {
            nb_info("raised kernel.pty.max from %lu to %lu: max_sandboxes x sandbox_ptys = %lu "
                    "ptys, plus the host's kernel.pty.reserve (%lu)",
                    max, raise, want, reserve);
            return;
        }
    }
    nb_warn("max_sandboxes x sandbox_ptys = %lu ptys, more than the %lu that containers "
            "may hold (kernel.pty.max - kernel.pty.reserve): raise kernel.pty.max to %lu",
            want, max > reserve ? max - reserve : 0, raise);
}

/*
 * The profile of sandboxes with a root: text's with two rules more at the
 * head of its "syscalls" list, unshare(CLONE_NEWUSER) and
 * setns(fd, CLONE_NEWUSER), by which nanobox-init gives root commands a
 * user namespace of the sandbox's own (root.c); it refuses both to every
 * process it starts. NULL when the list is not found or the result does
 * not parse (root commands then run in the host's user namespace).
 */
static char *seccomp_with_userns(const char *text)
{
    static const char rules[] =
        "{\"names\": [\"unshare\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": 0, "
        "\"value\": 268435456, \"op\": \"SCMP_CMP_EQ\"}], \"comment\": \"nanobox-init: a user "
        "namespace for root commands, refused to every process it starts\"}, "
        "{\"names\": [\"setns\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": 1, "
        "\"value\": 268435456, \"op\": \"SCMP_CMP_EQ\"}]}";
    const char *key = strstr(text, "\"syscalls\""), *open, *next;
    size_t head, len = strlen(text);
    char *out, msg[64];
    yajl_val v = NULL;
    if (key == NULL || (open = strchr(key, '[')) == NULL)
        return NULL;
    head = (size_t)(open + 1 - text);
    for (next = open + 1; *next == ' ' || *next == '\n' || *next == '\t' || *next == '\r'; next++)
        ;
    out = nb_xmalloc(len + sizeof(rules) + 2);
    memcpy(out, text, head);
    memcpy(out + head, rules, sizeof(rules) - 1);
    head += sizeof(rules) - 1;
    if (*next != ']')
        out[head++] = ',';
    memcpy(out + head, open + 1, len - (size_t)(open + 1 - text) + 1);
    if (nb_json_parse(out, strlen(out), 16, &v, msg, sizeof(msg)) != 0 || v == NULL ||
        !YAJL_IS_OBJECT(v)) {
        yajl_tree_free(v);
        free(out);
        return NULL;
    }
    yajl_tree_free(v);
    return out;
}

static int load_seccomp(struct nb_app *a, char *err, size_t errlen)
{
    char path[PATH_MAX], msg[256];
    yajl_val v = NULL;
    size_t len;
    char *text;

    nb_helper_data_path(a->conf.seccomp_profile, "nanobox-seccomp.json",
                        NB_PKGDATADIR "/nanobox-seccomp.json", path, sizeof(path));
    text = read_file(path, NB_SECCOMP_MAX, &len, msg, sizeof(msg));
    if (text == NULL) {
        snprintf(err, errlen, "seccomp profile: %s (set seccomp_profile?)", msg);
        return -1;
    }
    /* Docker would refuse every create with it: better to refuse to start */
    if (nb_json_parse(text, len, 16, &v, msg, sizeof(msg)) != 0 || v == NULL ||
        !YAJL_IS_OBJECT(v)) {
        snprintf(err, errlen, "seccomp profile %s is not a JSON object: %s", path,
                 v == NULL ? msg : "wrong type");
        yajl_tree_free(v);
        free(text);
        return -1;
    }
    yajl_tree_free(v);
    a->seccomp = text;
    a->seccomp_root = seccomp_with_userns(text);
    if (a->seccomp_root == NULL)
        nb_warn("seccomp profile %s: no \"syscalls\" list to add the user namespace of root "
                "commands to; root commands count against the host's uid 0",
                path);
    nb_info("sandboxes get the seccomp profile %s", path);
    return 0;
}

int nb_isolation_prepare(struct nb_app *a, char *err, size_t errlen)
{
    const struct nb_conf *c = &a->conf;
    char dir[PATH_MAX];

    if (nb_isolation_per_slot(c)) {
        if (check_uid_range(c, a->table.nslots, err, errlen) != 0)
            return -1;
        if (strcmp(c->sandbox_user, "1000:1000") != 0)
            nb_warn("sandbox_user %s is not used: sandboxes run as uids from sandbox_uid_base",
                    c->sandbox_user);
    } else {
        nb_warn("sandbox_uid_base is 0: every sandbox runs as %s and shares its per-user limits",
                c->sandbox_user);
    }
    sandbox_dir(c, dir, sizeof(dir));
    if (make_dir(dir, err, errlen) != 0 || install_agent(c, err, errlen) != 0 ||
        install_kernel(c, err, errlen) != 0 || write_net_files(c, err, errlen) != 0 ||
        write_home(c, err, errlen) != 0)
        return -1;
    for (uint32_t i = 0; i < a->table.nslots; i++)
        if (write_slot_files(c, i, err, errlen) != 0)
            return -1;
    check_ptys(c, a->table.nslots);
    if (nb_isolation_per_slot(c))
        nb_info("sandboxes run as uids %u-%lu, one per slot", c->sandbox_uid_base,
                (unsigned long)c->sandbox_uid_base + a->table.nslots - 1);
    return load_seccomp(a, err, errlen);
}
