/*
 * main.c - the nanobox command-line client: global options, the command
 * table, usage text and dispatch.
 *
 *   nanobox [--url URL] [--key KEY] [--json] COMMAND ...
 *
 * Each command lives in the cmd_*.c file named for what it works on; the
 * HTTP calls and the config lookup are in client.c (see docs/CLI.md).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "log.h"

static int cmd_help(struct client *c, const struct cli_cmd *cmd, int argc, char **argv);

static const struct cli_cmd commands[] = {
    {"create", cmd_create,
     "nanobox create [--image I | --template T] [--ttl S] [--memory 128m] [--cpus 0.5]\n"
     "               [--pids N] [--env K=V]... [--meta K=V]... [--network none|bridge]\n"
     "               [--auto-resume] [--on-timeout destroy|pause] [--volume NAME:/PATH]...",
     "create a sandbox and print its id",
     "  --image I         image to run (one of the server's allowed images)\n"
     "  --template T      template to start from (nanobox template ls)\n"
     "  --ttl S           lifetime in seconds (default: the server's default_ttl)\n"
     "  --memory SIZE     memory limit: bytes, or 128m, 1g (powers of 1024)\n"
     "  --cpus N          CPUs, fractions allowed (0.25)\n"
     "  --pids N          process limit\n"
     "  --env K=V         environment variable for every command (repeatable)\n"
     "  --meta K=V        metadata to find the sandbox by later (repeatable)\n"
     "  --network MODE    none (default) or bridge, if the server allows it\n"
     "  --auto-resume     once paused, the first exec/files/code call resumes it\n"
     "  --on-timeout W    what the end of its TTL does: destroy (default) or pause\n"
     "  --volume N:/P     mount your persistent volume N at /P (repeatable;\n"
     "                    nanobox volume create)\n"
     "Prints the new sandbox's id; with --json, the whole answer.\n"},
    {"ls", cmd_ls, "nanobox ls [--meta K=V]...\n       nanobox ls ID [PATH]",
     "list live sandboxes, or the files of a sandbox's directory",
     "  --meta K=V        only sandboxes whose metadata has K=V (repeatable: all must match)\n"
     "With an ID, lists the directory PATH of that sandbox (default /workspace; a\n"
     "relative PATH is under /workspace): type, size, mode, time and name.\n"},
    {"info", cmd_info, "nanobox info ID", "show one sandbox",
     "ID may be the full id or any prefix that names one live sandbox.\n"},
    {"rm", cmd_rm, "nanobox rm ID...\n       nanobox rm [-r] ID:PATH...",
     "destroy sandboxes, or delete files in one",
     "  -r, --recursive   ID:PATH: delete a directory and what is in it\n"
     "Prints each removed sandbox's id. Exit status 1 if any could not be removed.\n"
     "An ID:PATH argument deletes that file or (empty, or with -r) directory of the\n"
     "sandbox instead; nothing is destroyed unless every argument is a sandbox ID.\n"},
    {"ttl", cmd_ttl, "nanobox ttl ID SECONDS", "set a sandbox to expire SECONDS from now",
     "The new expiry replaces the old one: a small SECONDS shortens the sandbox's life.\n"},
    {"pause", cmd_pause, "nanobox pause ID [--no-memory]", "freeze every process of a sandbox",
     "Its memory, processes and open files stay; its TTL stops and its pause TTL\n"
     "(the server's max_pause) starts. Pausing a paused sandbox changes nothing.\n"
     "--no-memory: save its files instead and remove its container, releasing its\n"
     "memory; a resume boots it again from the files (its processes are gone).\n"},
    {"resume", cmd_resume, "nanobox resume ID", "thaw a paused sandbox",
     "Its processes go on where they were, with the TTL it had left.\n"
     "Resuming a running sandbox changes nothing.\n"},
    {"snapshot", cmd_snapshot, "nanobox snapshot ID [--name N]",
     "save a sandbox's files as a new template",
     "  --name N          the template's name (default snap-<ID's first 8>-<time>)\n"
     "/workspace and /tmp as the sandbox's processes see them (the rest of its\n"
     "filesystem is its image, read-only) become template N: \"nanobox create\n"
     "--template N\" starts a sandbox with them. The sandbox is frozen for the copy\n"
     "and then runs on (a paused one stays paused). Prints the template's name.\n"},
    {"fork", cmd_fork, "nanobox fork ID [--count N] [--ttl S]", "copy a sandbox into N new ones",
     "  --count N         how many (default 1, at most the server's fork_max)\n"
     "  --ttl S           each one's TTL in seconds (default the server's default_ttl)\n"
     "Each new sandbox gets the files of ID (/workspace, /tmp, and what a root wrote\n"
     "into its image), its env and its metadata; its processes are not copied (they\n"
     "start afresh). ID is frozen for the copy and then runs on. Prints the new ids.\n"},
    {"exec", cmd_exec,
     "nanobox exec ID [--timeout S] [--cwd DIR] [--env K=V]... [--stdin FILE|-] [--sh] [-d]\n"
     "             [-u root] [--] COMMAND...",
     "run a command in a sandbox",
     "  --timeout S       kill the command after S seconds (fractions allowed)\n"
     "  --cwd DIR         directory to run in (default /workspace)\n"
     "  --stdin FILE      feed FILE (\"-\": this terminal's stdin) to the command\n"
     "  --env K=V         environment variable for this command (repeatable)\n"
     "  --sh              join COMMAND's words with spaces into one /bin/sh -c string\n"
     "  -d, --detach      run it in the background and print its pid (see ps, logs, kill)\n"
     "  -u, --user root   run it as root, where the sandbox's template has one (a root\n"
     "                    without capabilities; the operator's root_templates)\n"
     "As with docker exec, several words are the program and its arguments, each\n"
     "passed as it is, no shell: nanobox exec ID -- python3 -c 'print(6*7)'.\n"
     "One word is a shell string for /bin/sh -c: nanobox exec ID 'ls | wc -l'.\n"
     "Options come before COMMAND (or before \"--\"). The command's stdout and stderr\n"
     "go to ours as it writes them, and nanobox exits with the command's exit status\n"
     "(124 if it timed out, as timeout(1) does).\n"},
    {"shell", cmd_shell, "nanobox shell ID [--cwd DIR] [--env K=V]... [-- COMMAND...]",
     "an interactive terminal in a sandbox (as docker exec -it)",
     "  --cwd DIR         directory to start in (default /workspace)\n"
     "  --env K=V         environment variable for the shell (repeatable)\n"
     "Runs COMMAND (default: bash -l, or sh -l without bash) on a terminal in the\n"
     "sandbox, sized as ours and resized with it. Our terminal goes into raw mode:\n"
     "every key, ^C and ^D included, goes to the sandbox; it is restored when the\n"
     "shell ends. nanobox exits with the shell's exit status. Without a terminal,\n"
     "stdin is typed in as it is and its end is sent as ^D.\n"
     "Closing the session (the shell exits, or nanobox is killed) ends every process\n"
     "started in it.\n"},
    {"ps", cmd_ps, "nanobox ps ID", "list a sandbox's background processes",
     "Shows each process started by \"nanobox exec -d\": pid, running or its exit\n"
     "status, when it started, its output so far (stdout/stderr) and its command.\n"},
    {"logs", cmd_logs, "nanobox logs ID PID [-f]", "print a background process's output",
     "  -f, --follow      go on printing as it writes, until it exits\n"
     "stdout goes to ours, stderr to ours. The sandbox keeps the last 1 MiB of each.\n"},
    {"kill", cmd_kill, "nanobox kill ID PID [-s SIGNAL]", "signal a background process",
     "  -s SIGNAL         TERM (default), KILL, INT, HUP, QUIT, USR1, USR2, STOP or CONT\n"
     "The signal goes to the process's whole process group.\n"},
    {"port", cmd_port,
     "nanobox port open ID SANDBOXPORT [--duration S] [--hostport N]\n"
     "       nanobox port ls ID\n"
     "       nanobox port close ID SANDBOXPORT",
     "expose a sandbox's port on the host, list or close them",
     "  --duration S      seconds the port stays open (default 600)\n"
     "  --hostport N      host TCP port to use (default: one from the server's port_range)\n"
     "\"port open\" prints the URL (through nginx) and host:hostport (a plain TCP port).\n"},
    {"run", cmd_run, "nanobox run LANGUAGE FILE|- [--timeout S] [--stdin FILE|-]",
     "run code once in a fresh sandbox (POST /run)",
     "  --timeout S       kill the program after S seconds\n"
     "  --stdin FILE      text the program reads on its stdin (\"-\": ours)\n"
     "LANGUAGE is one the server knows (python, sh with the default image). FILE \"-\"\n"
     "reads the code from stdin. The program's stdout and stderr go to ours, and\n"
     "nanobox exits with its exit status (124 if it timed out).\n"},
    {"code", cmd_code,
     "nanobox code ID [-c CODE | FILE | -] [--context C] [--language L] [--timeout S]\n"
     "             [--save-images DIR]",
     "run code in a sandbox's interpreter session (state kept between runs)",
     "  -c CODE           the code to run (else FILE, or \"-\" for stdin)\n"
     "  --context C       the session to run in (default: the language's own)\n"
     "  --language L      python (default), javascript or bash\n"
     "  --timeout S       interrupt the code after S seconds\n"
     "  --save-images DIR write image results to DIR/image-N.png (or .jpg)\n"
     "Runs like a notebook cell: what the code defines stays for the next \"nanobox code\"\n"
     "in the same session. The sandbox needs the code interpreter's image\n"
     "(nanobox create --image nanobox-python:latest). stdout and stderr stream to ours;\n"
     "a result prints its text, an image \"[image/png 640x480, 23 KiB]\". An exception\n"
     "prints its traceback on stderr and exits 1; a timeout exits 124.\n"},
    {"contexts", cmd_contexts,
     "nanobox contexts ID [ls]\n"
     "       nanobox contexts ID create [--language L] [--cwd DIR]\n"
     "       nanobox contexts ID rm CTX\n"
     "       nanobox contexts ID restart CTX",
     "list, create, remove or restart a sandbox's interpreter sessions",
     "  --language L      python (default), javascript or bash\n"
     "  --cwd DIR         the session's working directory (default /workspace)\n"
     "\"create\" prints the new context's id, for nanobox code ID --context CTX.\n"
     "\"restart\" starts the session afresh: its variables are gone.\n"},
    {"cp", cmd_cp, "nanobox cp [-r] LOCALPATH ID:PATH\n       nanobox cp [-r] ID:PATH LOCALPATH",
     "copy files into or out of a sandbox",
     "  -r, --recursive   copy directories and what is in them, as one tar (symlinks as\n"
     "                    symlinks, modes kept); ID:PATH - writes that tar to stdout\n"
     "A relative PATH is under /workspace. As with cp, a destination that is a\n"
     "directory (a local one, one in the sandbox, or an ID:PATH ending in \"/\") gets\n"
     "the source under its own name: nanobox cp ID:/workspace/out.txt .\n"
     "A LOCALPATH of \"-\" is stdin or stdout.\n"},
    {"mkdir", cmd_mkdir, "nanobox mkdir ID PATH...", "create directories in a sandbox",
     "Parents are created too, and an existing directory is fine (as mkdir -p).\n"},
    {"mv", cmd_mv, "nanobox mv ID FROM TO", "move or rename a file or directory in a sandbox",
     "As with mv, a TO that is a directory gets FROM under its own name.\n"},
    {"keys", cmd_keys,
     "nanobox keys add NAME [--role user|admin] [--max-sandboxes N] [--max-memory SIZE]\n"
     "                 [--max-cpus N] [--max-ports N] [--max-templates N] [--rate R]\n"
     "                 [--max-volumes N] [--max-volume-bytes SIZE]\n"
     "       nanobox keys ls\n"
     "       nanobox keys rm NAME [--destroy]",
     "add, list, remove API keys (on the server's host: edits its keys file)",
     "  --config PATH     the server's config (else NANOBOX_CONFIG, else\n"
     "                    /etc/nanobox/nanobox.conf); its keys_file is edited\n"
     "  --role R          (add) user (default: sees only its own sandboxes) or admin\n"
     "  --max-sandboxes N (add) live sandboxes of the key (0 or none: no limit)\n"
     "  --max-memory SIZE (add) memory of its live sandboxes together (2g)\n"
     "  --max-cpus N      (add) CPUs of its live sandboxes together (4, 0.5)\n"
     "  --max-ports N     (add) open ports over its sandboxes\n"
     "  --max-templates N (add) templates it builds\n"
     "  --rate R          (add) its nginx rate class, as limit_req writes it (10r/s)\n"
     "  --max-volumes N   (add) persistent volumes it makes (default: volume_max_count)\n"
     "  --max-volume-bytes SIZE\n"
     "                    (add) their sizes together (default: volume_quota)\n"
     "  --destroy         (rm) also destroy its live sandboxes now, with this CLI's key\n"
     "add prints the new key once (64 hex digits); the file keeps only its SHA-256.\n"
     "The service reads the file again on its next request: no restart, no signal.\n"},
    {"volume", cmd_volume,
     "nanobox volume create NAME [--size 1g]\n"
     "       nanobox volume ls\n"
     "       nanobox volume rm NAME...",
     "make, list, remove persistent volumes (mounted with create --volume)",
     "  --size SIZE       (create) what it may hold, enforced by the kernel: bytes, or\n"
     "                    512m, 1g (default and most: the server's volume_size_default\n"
     "                    and volume_size_max)\n"
     "A volume is your key's own: its files outlive the sandboxes that mount it, and\n"
     "several of your sandboxes may mount it at once. rm refuses one a sandbox has\n"
     "mounted. Exit status 1 if any could not be made or removed.\n"},
    {"template", cmd_template,
     "nanobox template build NAME -f DOCKERFILE [--file PATH=LOCALPATH]... [--memory 1g]\n"
     "                          [--cpus 1] [--follow]\n"
     "       nanobox template ls\n"
     "       nanobox template rm NAME... [--force]\n"
     "       nanobox template logs NAME [-f]",
     "build, list, remove templates (images sandboxes start from) and read build logs",
     "  -f DOCKERFILE     (build) the local Dockerfile; its FROM must be an image the\n"
     "                    server allows (template_from)\n"
     "  --file P=LOCAL    (build) put the local file LOCAL in the build context at P,\n"
     "                    for the Dockerfile's COPY (repeatable)\n"
     "  --memory SIZE     (build) memory of the build's RUN steps\n"
     "  --cpus N          (build) CPUs of the build\n"
     "  --follow          (build) print the build's output until it ends\n"
     "  -f, --follow      (logs) keep printing until the build ends\n"
     "  --force           (rm) remove even while sandboxes of it run (they keep running)\n"
     "The build runs on the server; \"build\" prints NAME building at once. With\n"
     "--follow (and \"logs -f\") nanobox exits 0 once the template is ready, 1 if the\n"
     "build failed. Start a sandbox from it with nanobox create --template NAME.\n"},
    {"mcp", cmd_mcp, "nanobox mcp", "serve the sandbox tools to an MCP client over stdio",
     "Speaks the Model Context Protocol (JSON-RPC 2.0, one message per line) on stdin and\n"
     "stdout, for an MCP client that starts it: claude mcp add nanobox -- nanobox mcp.\n"
     "Tools: sandbox_create, sandbox_exec, sandbox_write_file, sandbox_read_file,\n"
     "sandbox_list_files, sandbox_open_port, sandbox_list, sandbox_destroy, run_code.\n"
     "The server and key come from --url/--key, NANOBOX_URL/NANOBOX_API_KEY or cli.conf,\n"
     "as for every command. Messages go to stderr. See docs/MCP.md.\n"},
    {"help", cmd_help, "nanobox help [COMMAND]", "show this help, or a command's", ""},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const char global_help[] =
    "Global options (before COMMAND):\n"
    "  --url URL         the nanobox server (else NANOBOX_URL, url in cli.conf,\n"
    "                    http://127.0.0.1:8080)\n"
    "  --key KEY         the API key (else NANOBOX_API_KEY, api_key in cli.conf,\n"
    "                    api_key in /etc/nanobox/nanobox.conf if readable)\n"
    "  --json            print the server's JSON answers instead of text\n"
    "cli.conf is ~/.config/nanobox/cli.conf (\"url = ...\", \"api_key = ...\").\n"
    "Exit status: 0 success, 1 the server refused or could not be reached,\n"
    "2 bad usage; exec and run exit with the command's status, code with 1 when\n"
    "the code raised.\n";

static void print_usage(FILE *f)
{
    fprintf(f, "usage: nanobox [--url URL] [--key KEY] [--json] COMMAND ...\n\nCommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n%s\nSee \"nanobox COMMAND --help\" and docs/CLI.md.\n", global_help);
}

static const struct cli_cmd *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}

static int cmd_help(struct client *c, const struct cli_cmd *cmd, int argc, char **argv)
{
    const struct cli_cmd *which;

    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        print_usage(stdout);
        return CLI_OK;
    }
    if ((which = find_command(argv[1])) == NULL) {
        fprintf(stderr, "nanobox: unknown command \"%s\"\n\n", argv[1]);
        print_usage(stderr);
        return CLI_USAGE;
    }
    return cli_help(which);
}

/* "--name VALUE" or "--name=VALUE" at argv[*i]: 1 and *val, 0, or -1 (no value). */
static int global_value(int argc, char **argv, int *i, const char *name, const char **val)
{
    size_t n = strlen(name);

    if (strncmp(argv[*i], name, n) != 0)
        return 0;
    if (argv[*i][n] == '=') {
        *val = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *val = argv[++*i];
    return 1;
}

int main(int argc, char **argv)
{
    struct client c;
    const struct cli_cmd *cmd;
    int i, rc;

    nb_log_init("nanobox", NB_LOG_WARN);
    client_init(&c);
    for (i = 1; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        int m;
        if (!strcmp(a, "--json")) {
            c.json = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_usage(stdout);
            return CLI_OK;
        } else if (!strcmp(a, "--version")) {
            printf("nanobox %s\n", PACKAGE_VERSION);
            return CLI_OK;
        } else if ((m = global_value(argc, argv, &i, "--url", &c.flag_url)) != 0 ||
                   (m = global_value(argc, argv, &i, "--key", &c.flag_key)) != 0) {
            if (m < 0) {
                fprintf(stderr, "nanobox: %s needs a value\n\n", a);
                print_usage(stderr);
                return CLI_USAGE;
            }
        } else {
            fprintf(stderr, "nanobox: unknown option %s\n\n", a);
            print_usage(stderr);
            return CLI_USAGE;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "nanobox: no command given\n\n");
        print_usage(stderr);
        return CLI_USAGE;
    }
    if ((cmd = find_command(argv[i])) == NULL) {
        fprintf(stderr, "nanobox: unknown command \"%s\"\n\n", argv[i]);
        print_usage(stderr);
        return CLI_USAGE;
    }
    rc = cmd->run(&c, cmd, argc - i, argv + i);
    fflush(stdout);
    client_cleanup(&c);
    return rc;
}
