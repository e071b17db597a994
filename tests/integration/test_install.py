"""`make install` (docs/INSTALL.md): a fresh configure with its own prefix,
sysconfdir and localstatedir, built and installed under DESTDIR. What lands
where, that the installed files name the configured paths (the units, the
config, the logrotate file, the helper paths compiled into nanobox-fcgi),
that the installed config and render-nginx.sh work from there, that a
second install keeps the operator's config, that `make uninstall` removes
what it installed, and that systemd-analyze accepts the units (when it is
installed: systemd need not run)."""

import os
import re
import shutil
import stat
import subprocess

import pytest

from nbtest import NGINX, REPO, run

PREFIX, SYSCONF, LOCALSTATE = "/opt/nbtest", "/etc/nbtest", "/var/nbtest"

EXPECTED_FILES = [
    f"{PREFIX}/bin/nanobox",
    f"{PREFIX}/sbin/nanobox-fcgi",
    f"{PREFIX}/sbin/nanobox-fwd",
    f"{PREFIX}/sbin/nanobox-front",
    f"{PREFIX}/libexec/nanobox/nanobox-init",
    f"{PREFIX}/share/nanobox/nanobox-seccomp.json",
    f"{PREFIX}/share/nanobox/nanobox-openapi.json",
    f"{PREFIX}/share/nanobox/kernel/bridge.py",
    f"{PREFIX}/share/nanobox/kernel/display.py",
    f"{PREFIX}/share/nanobox/kernel/jsrunner.js",
    f"{PREFIX}/share/nanobox/www/index.html",
    f"{PREFIX}/share/nanobox/www/app.js",
    f"{PREFIX}/share/nanobox/www/style.css",
    f"{PREFIX}/share/nanobox/nginx/nanobox.conf.in",
    f"{PREFIX}/share/nanobox/nginx/nanobox-ports.conf.in",
    f"{PREFIX}/share/nanobox/nginx/nanobox-http.conf.in",
    f"{PREFIX}/share/nanobox/nginx/nanobox-standalone.conf.in",
    f"{PREFIX}/share/nanobox/nginx/nanobox-front.conf.in",
    f"{PREFIX}/share/nanobox/setup/render-nginx.sh",
    f"{PREFIX}/share/nanobox/setup/render-front.sh",
    f"{PREFIX}/share/nanobox/setup/image.sh",
    f"{PREFIX}/share/nanobox/setup/common.sh",
    f"{PREFIX}/share/doc/nanobox/INSTALL.md",
    f"{PREFIX}/lib/systemd/system/nanobox-fcgi.service",
    f"{PREFIX}/lib/systemd/system/nanobox-nginx.service",
    f"{SYSCONF}/nanobox/nanobox.conf",
    f"{SYSCONF}/nanobox/nginx.env",
    f"{SYSCONF}/logrotate.d/nanobox",
]
EXECUTABLES = [f for f in EXPECTED_FILES if "/bin/" in f or "/sbin/" in f or "/libexec/" in f
               or f.endswith(("render-nginx.sh", "render-front.sh", "image.sh"))]
EXPECTED_DIRS = [f"{LOCALSTATE}/lib/nanobox", f"{LOCALSTATE}/log/nanobox",
                 f"{SYSCONF}/nanobox/nginx"]


def xdist_group_of(item):
    """One group: the configure and build of `installed` run once (conftest.py)."""
    return "install"


def files_under(root):
    out = set()
    for d, _, files in os.walk(root):
        for f in files:
            out.add("/" + os.path.relpath(os.path.join(d, f), root))
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(builddir, destdir) of a configure with other paths, installed."""
    if not (REPO / "configure").exists():
        pytest.skip("no configure script (run autoreconf -fi)")
    build = tmp_path_factory.mktemp("install-build")
    dest = tmp_path_factory.mktemp("install-dest")
    r = subprocess.run([str(REPO / "configure"), f"--prefix={PREFIX}", f"--sysconfdir={SYSCONF}",
                        f"--localstatedir={LOCALSTATE}"], cwd=build, timeout=300,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = run(["make", "-C", str(build), "-j2", "install", f"DESTDIR={dest}"], check=False, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    yield build, dest
    shutil.rmtree(build, ignore_errors=True)
    shutil.rmtree(dest, ignore_errors=True)


def test_make_install_puts_every_file_under_the_configured_paths(installed):
    build, dest = installed
    have = files_under(dest)
    missing = [f for f in EXPECTED_FILES if f not in have]
    assert not missing, f"not installed: {missing}; installed: {sorted(have)}"
    stray = [f for f in have if not f.startswith((PREFIX + "/", SYSCONF + "/", LOCALSTATE + "/"))]
    assert not stray, f"installed outside prefix/sysconfdir/localstatedir: {stray}"
    for f in EXECUTABLES:
        assert os.access(f"{dest}{f}", os.X_OK), f"{f} is not executable"
    for d in EXPECTED_DIRS:
        assert os.path.isdir(f"{dest}{d}"), f"{d} was not created"

    # the config: a fresh key, readable by root only, the configured paths
    conf_path = f"{dest}{SYSCONF}/nanobox/nanobox.conf"
    assert stat.S_IMODE(os.stat(conf_path).st_mode) == 0o600
    conf = open(conf_path).read()
    assert re.search(r"^api_key = [0-9a-f]{64}$", conf, re.M), conf
    assert f"state_file = {LOCALSTATE}/lib/nanobox/state" in conf
    # ... and nanobox-fcgi accepts it
    r = run([f"{dest}{PREFIX}/sbin/nanobox-fcgi", "-c", conf_path, "-t"], check=False)
    assert r.returncode == 0, r.stdout + r.stderr

    # the units and the logrotate file name the installed paths
    fcgi_unit = open(f"{dest}{PREFIX}/lib/systemd/system/nanobox-fcgi.service").read()
    assert f"ExecStart={PREFIX}/sbin/nanobox-fcgi -c {SYSCONF}/nanobox/nanobox.conf\n" in fcgi_unit
    assert "Type=notify" in fcgi_unit and "Restart=on-failure" in fcgi_unit
    nginx_unit = open(f"{dest}{PREFIX}/lib/systemd/system/nanobox-nginx.service").read()
    assert f"{PREFIX}/share/nanobox/setup/render-nginx.sh --www-dir {PREFIX}/share/nanobox/www" in nginx_unit
    assert f"EnvironmentFile=-{SYSCONF}/nanobox/nginx.env" in nginx_unit
    # systemd starts either again when it dies (without systemd: up.sh's supervise.sh)
    assert "Restart=on-failure" in nginx_unit and "KillMode=mixed" in nginx_unit
    assert "KillMode=process" in fcgi_unit  # its forwarders outlive it, to be adopted back
    rot = open(f"{dest}{SYSCONF}/logrotate.d/nanobox").read()
    assert f"{LOCALSTATE}/log/nanobox/*.log" in rot and "/run/nanobox/fcgi.pid" in rot
    assert "@" not in re.sub(r"#.*", "", fcgi_unit + nginx_unit + rot), "an unsubstituted @token@"

    # where the installed nanobox-fcgi looks for what is not next to it
    binary = open(f"{dest}{PREFIX}/sbin/nanobox-fcgi", "rb").read()
    for path in (f"{PREFIX}/libexec/nanobox/nanobox-init", f"{PREFIX}/share/nanobox/kernel",
                 f"{PREFIX}/share/nanobox/nanobox-seccomp.json"):
        assert path.encode() in binary, f"nanobox-fcgi does not look for {path}"


def test_installed_render_nginx_finds_its_templates_and_www(installed, tmp_path):
    if not NGINX:
        pytest.skip("nginx is not installed")
    _, dest = installed
    share = f"{dest}{PREFIX}/share/nanobox"
    out = tmp_path / "nginx"
    r = run(["bash", f"{share}/setup/render-nginx.sh", "--www-dir", f"{share}/www", str(out),
             "/run/nanobox-test/fcgi.sock", "127.0.0.1:1", str(tmp_path / "prefix")], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (out / "nginx.conf").read_text()
    assert f"alias {share}/www/;" in text
    # without --www-dir: the installed www next to the installed script
    r = run(["bash", f"{share}/setup/render-nginx.sh", str(tmp_path / "n2"),
             "/run/nanobox-test/fcgi.sock", "127.0.0.1:1", str(tmp_path / "p2")], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "n2" / "www" / "index.html").read_bytes() == \
        open(f"{share}/www/index.html", "rb").read()


def test_installed_render_front_finds_its_template(installed, tmp_path):
    """A cluster front's config from the installed script and template,
    which the installed nanobox-front's map lets nginx accept."""
    if not NGINX:
        pytest.skip("nginx is not installed")
    _, dest = installed
    out, prefix = tmp_path / "front", tmp_path / "prefix"
    r = run(["bash", f"{dest}{PREFIX}/share/nanobox/setup/render-front.sh", str(out),
             "127.0.0.1:1", str(prefix)], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"include {out}/nodes.conf;" in (out / "nanobox-front.conf").read_text()
    # etcd that never answers: --once still writes a map of no node, and fails
    r = run([f"{dest}{PREFIX}/sbin/nanobox-front", "--etcd", "http://127.0.0.1:1", "--out",
             str(out / "nodes.conf"), "--once"], check=False)
    assert r.returncode == 1 and "etcd does not answer" in r.stderr, r.stderr
    t = run([NGINX, "-t", "-c", str(out / "nanobox-front.conf"), "-p", f"{prefix}/"], check=False)
    assert t.returncode == 0, t.stderr


def test_systemd_analyze_verify_accepts_the_units(installed, tmp_path):
    sa = shutil.which("systemd-analyze")
    if not sa:
        pytest.skip("systemd-analyze is not installed")
    _, dest = installed
    # verify checks that each command exists: point the units at DESTDIR
    for name in ("nanobox-fcgi.service", "nanobox-nginx.service"):
        t = open(f"{dest}{PREFIX}/lib/systemd/system/{name}").read()
        for p in (PREFIX, SYSCONF, LOCALSTATE):
            t = t.replace(p + "/", f"{dest}{p}/")
        (tmp_path / name).write_text(t)
    r = run([sa, "verify", str(tmp_path / "nanobox-fcgi.service"), str(tmp_path / "nanobox-nginx.service")],
            check=False)
    # a container without systemd as PID 1 may lack the default targets
    out = "\n".join(line for line in (r.stdout + r.stderr).splitlines()
                    if "nanobox" in line and "sysinit.target" not in line)
    assert r.returncode == 0 or not out, r.stdout + r.stderr
    assert not out, out


def test_reinstall_keeps_the_config_and_uninstall_removes_what_it_installed(installed):
    build, dest = installed
    conf_path = f"{dest}{SYSCONF}/nanobox/nanobox.conf"
    env_path = f"{dest}{SYSCONF}/nanobox/nginx.env"
    key = re.search(r"^api_key = (\S+)$", open(conf_path).read(), re.M).group(1)
    run(["make", "-C", str(build), "install", f"DESTDIR={dest}"], timeout=300)
    assert f"api_key = {key}\n" in open(conf_path).read(), "a second install replaced the config"

    # the operator changed nginx.env: uninstall keeps it, removes the rest
    with open(env_path, "a") as f:
        f.write("NANOBOX_LISTEN=0.0.0.0:80\n")
    run(["make", "-C", str(build), "uninstall", f"DESTDIR={dest}"], timeout=300)
    left = files_under(dest)
    assert left == {f"{SYSCONF}/nanobox/nginx.env"}, sorted(left)
