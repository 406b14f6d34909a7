#!/usr/bin/env python3
# Memory and heartbeat while files go in and out: `smolcord run` (the
# binary given as SMOLCORD_BIN, default target/debug/smolcord) against
# `smolcord sim`, one fresh pair per scenario: `text` (a text DM), `download`
# (an 18 MiB voice note the bridge downloads for the agent: the control
# API's 26 MiB body limit holds 18 MiB in base64), `upload` (the agent leaves
# a 10 MiB file in $SMOLCORD_OUTPUT_DIR, sent with the reply). Prints the
# bot's VmHWM at idle and after, and both sides' heartbeat accounts.
#   scripts/files-bench.py text download upload
import json, os, subprocess, sys, time, base64, urllib.request, tempfile, signal
BIN = os.environ.get("SMOLCORD_BIN", "target/debug/smolcord")
def hwm(pid):
    vals = {}
    for line in open(f"/proc/{pid}/status"):
        k, v = line.split(":", 1)
        if k in ("VmHWM", "VmRSS"):
            vals[k] = int(v.split()[0])
    return vals
def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=60))
def get(url):
    return json.load(urllib.request.urlopen(url, timeout=60))
def scenario(name, port, kind):
    sim = subprocess.Popen([BIN, "sim", "--listen", f"127.0.0.1:{port}", "--heartbeat-ms", "1000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    state = tempfile.mkdtemp()
    script = "cat >/dev/null; "
    if kind == "upload":
        script += 'head -c 10485760 /dev/urandom > "$SMOLCORD_OUTPUT_DIR/big.bin"; '
    script += "echo done"
    json.dump({"allowed_user_ids": ["42"], "agent_cmd": ["/bin/sh", "-c", script]}, open(f"{state}/config.json", "w"))
    env = {"PATH": "/usr/bin:/bin", "DISCORD_TOKEN": "MTEwMDAwMDAwMDAwMDAwMDAwMQ.HDdKgA.c21vbGNvcmQtc2ltdWxhdG9yLW5vLXNlY3JldA",
           "SMOLCORD_GATEWAY_URL": f"ws://127.0.0.1:{port}", "SMOLCORD_API_BASE": f"http://127.0.0.1:{port}/api/v10",
           "SMOLCORD_STATE_DIR": state, "RUST_LOG": "warn"}
    log = open(f"{state}.log", "w")
    bot = subprocess.Popen([BIN, "run"], env=env, stdout=log, stderr=log)
    ctl = f"http://127.0.0.1:{port}/control"
    time.sleep(4)  # connected, a few beats
    idle = hwm(bot.pid)
    if kind == "download":
        audio = b"OggS" + os.urandom(18 * 1024 * 1024)
        r = post(f"{ctl}/dm", {"author_id": 42, "author_name": "a", "voice_ogg_base64": base64.b64encode(audio).decode(), "duration_secs": 2})
    else:
        r = post(f"{ctl}/dm", {"author_id": 42, "author_name": "a", "content": "hi"})
    channel = r["channel_id"]
    want = 2 if kind == "upload" else 1
    t0 = time.time()
    while time.time() - t0 < 60:
        msgs = get(f"{ctl}/messages?channel_id={channel}")
        # The agent's "done"; for the voice note (no transcriber here) the
        # notice that voice is not set up, sent after the download.
        done = [m for m in msgs if "done" in m.get("content", "") or "voice" in m.get("content", "")]
        if done and len(msgs) >= want:
            break
        time.sleep(0.2)
    took = time.time() - t0
    time.sleep(3)
    after = hwm(bot.pid)
    stats = get(f"{ctl}/stats")["totals"]
    st = json.loads(subprocess.run([BIN, "status", "--json"], env=env, capture_output=True).stdout)
    life = st["heartbeat"]["lifetime"]
    bot.send_signal(signal.SIGTERM); bot.wait(20)
    sim.send_signal(signal.SIGINT); sim.wait(20)
    log.close()
    late = sum(1 for l in open(f"{state}.log") if "late" in l.lower() and "heartbeat" in l.lower())
    print(f"{name:9} idle HWM {idle['VmHWM']/1024:.1f} MiB, peak HWM {after['VmHWM']/1024:.1f} MiB (+{(after['VmHWM']-idle['VmHWM'])/1024:.1f}), "
          f"RSS after {after['VmRSS']/1024:.1f} MiB; handled in {took:.1f} s; gateway: {stats['heartbeats']} beats, {stats['late_heartbeats']} late, {stats['missed_deadlines']} missed; client late-beat warnings {late}; client account {json.dumps({k: life[k] for k in life if 'late' in k or k in ('beats','sent','acks')})}")
for i, kind in enumerate(sys.argv[1:]):
    scenario(kind, 47400 + i, kind)
