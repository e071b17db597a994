"""
test_ratelimit.py - request rates (docs/CONFIG.md "Keys file", docs/NGINX.md
"Request rate"): a key's own `rate=`, enforced by nanobox-fcgi (429 "quota"
naming the rate, with Retry-After, the key's bucket only), and nginx's
limit_req per key in front of the whole API (429 "rate_limited" in the
API's JSON shape, or E2B's on the facade's routes), here rendered with a
tiny rate for this test's stack only.
"""

import threading
import time

import requests

import nbtest
from test_keys import KeyApi, add_key


def burst(st, key, n, path="/sandbox", header="Authorization"):
    """n quick GETs of path with key; their answers."""
    s = requests.Session()
    value = f"Bearer {key}" if header == "Authorization" else key
    return [s.get(st.url + path, headers={header: value}, timeout=30) for _ in range(n)]


def test_a_key_over_its_rate_gets_429_naming_it_and_other_keys_go_on(make_stack):
    st = make_stack("rate")
    slow = add_key(st, "slow", "--rate", "5r/s")
    other = KeyApi(st, add_key(st, "other"))
    others, stop = [], threading.Event()

    def steady():
        s = requests.Session()
        while not stop.is_set():
            others.append(s.get(st.url + "/sandbox", headers=other.headers(), timeout=30).status_code)
            time.sleep(0.02)

    t = threading.Thread(target=steady)
    t.start()
    try:
        answers = burst(st, slow, 30)
    finally:
        stop.set()
        t.join()
    codes = [r.status_code for r in answers]
    # a full bucket of 5 (and what refilled meanwhile) passes, then 429s
    assert codes.count(200) >= 5 and codes.count(429) >= 15, codes
    limited = next(r for r in answers if r.status_code == 429)
    body = nbtest.assert_error(limited, 429, "quota")
    assert 'quota rate=5r/s of key "slow" reached' in body["error"], body
    assert int(limited.headers["Retry-After"]) >= 1, limited.headers
    # the other key at the same time: never limited
    assert others and set(others) == {200}, others
    # the admin key (no rate) neither
    assert all(r.status_code == 200 for r in burst(st, st.api_key, 30))
    # after waiting, the key works again
    time.sleep(1.2)
    assert [r.status_code for r in burst(st, slow, 3)] == [200] * 3
    # the E2B facade answers the same in E2B's shape
    e2b = burst(st, "e2b_" + slow, 30, path="/sandboxes", header="X-API-KEY")
    limited = next((r for r in e2b if r.status_code == 429), None)
    assert limited is not None, [r.status_code for r in e2b]
    b = nbtest.parse_json(limited)
    assert b["code"] == 429 and 'quota rate=5r/s of key "slow"' in b["message"], b
    assert "Retry-After" in limited.headers


def test_a_reload_keeps_each_keys_bucket(make_stack):
    """Buckets go by key name: keys added before and after one (a reload of
    the file) neither refill nor take its bucket."""
    st = make_stack("ratereload")
    slow = add_key(st, "zz", "--rate", "3r/m")
    assert [r.status_code for r in burst(st, slow, 3)] == [200] * 3
    new = [add_key(st, f"a{i}", "--rate", "3r/m") for i in range(3)][1]
    r = burst(st, slow, 1)[0]
    assert r.status_code == 429 and "rate=3r/m" in r.text, r.text
    assert int(r.headers["Retry-After"]) > 1, r.headers
    # the new keys have buckets of their own, full
    assert [r.status_code for r in burst(st, new, 3)] == [200] * 3


def test_nginx_limits_each_key_and_answers_429_json(make_stack):
    st = make_stack("nginxrate", render_args=["--rate", "2r/s", "--rate-burst", "3"])
    user = add_key(st, "u")
    codes = [r.status_code for r in burst(st, st.api_key, 20)]
    assert codes.count(429) >= 10, codes
    limited = next(r for r in burst(st, st.api_key, 5) if r.status_code == 429)
    body = nbtest.assert_error(limited, 429, "rate_limited")
    assert "2r/s" in body["error"], body
    assert limited.headers.get("Retry-After") == "1", limited.headers
    # another key has a bucket of its own
    assert burst(st, user, 1)[0].status_code == 200
    # E2B's routes: E2B's shape
    e2b = [r for r in burst(st, "e2b_" + user, 20, path="/sandboxes", header="X-API-KEY")
           if r.status_code == 429]
    assert e2b, "no 429 on /sandboxes"
    b = nbtest.parse_json(e2b[0])
    assert b["code"] == 429 and "2r/s" in b["message"], b
    # /healthz is not limited
    s = requests.Session()
    assert {s.get(st.url + "/healthz", timeout=10).status_code for _ in range(20)} == {200}
    # after a wait, the key goes again
    time.sleep(2)
    assert burst(st, st.api_key, 1)[0].status_code == 200
