"""A tiny discord.py bot run against `smolcord sim` (see run.sh).

It points discord.py at the simulator (REST base and default gateway), and
then: waits for READY, injects a DM through the control API, answers that
DM with `channel.send` (through an injected route 429), then receives a
voice-note DM (flags, audio attachment, duration, waveform) and a guild
message (in a channel from GUILD_CREATE), answers that in the guild
(through an injected global 429), asks the simulator for an op 7
Reconnect and waits for the resumed session (RESUMED), and stays connected
until the simulator has counted `--beats` heartbeats on the session's live
connection. Every wait is bounded. Writes `{"channel_id", "reply"}` to
`--result` for the checker; exit 1 on any failure.
"""

import argparse
import asyncio
import json
import logging
import sys
import time

import aiohttp
import discord
import discord.gateway
import discord.http
import yarl

log = logging.getLogger("compat.discordpy")

# What the bot posts in the guild channel (after a global 429).
GUILD_ANSWER = "hello bob"


class Bot(discord.Client):
    def __init__(self, args):
        # Intents.default() leaves out the privileged ones; DM text still
        # arrives (Discord's exception for DMs with the app).
        super().__init__(intents=discord.Intents.default())
        self.args = args
        self.nonce = f"compat-discordpy-{int(time.time() * 1000) % 1_000_000}"
        self.reply = f"echo: {self.nonce}"
        self.channel_id = None
        self.replied = asyncio.Event()
        self.ready_seen = asyncio.Event()
        self.failure = None

    async def control(self, path, body):
        """POSTs to the control API; the answer, or None after recording a failure."""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            async with http.post(self.args.control + path, json=body) as resp:
                answer = await resp.json(content_type=None)
                if resp.status == 200:
                    return answer
        self.finish(f"control {path} answered {resp.status}: {answer}")
        return None

    def finish(self, failure=None):
        self.failure = self.failure or failure
        self.replied.set()

    async def on_ready(self):
        log.info("READY as %s (%s)", self.user, self.user.id)
        if self.ready_seen.is_set():
            return  # a later READY after a reconnect: the DM is already out
        self.ready_seen.set()
        body = {"author_id": "4242", "author_name": "compat-alice", "content": self.nonce}
        answer = await self.control("/dm", body)
        if answer is not None:
            self.channel_id = answer["channel_id"]
            log.info("DM injected in channel %s", self.channel_id)

    async def on_message(self, message):
        if self.user is not None and message.author.id == self.user.id:
            return  # our own reply, echoed back as MESSAGE_CREATE
        if message.content == self.nonce:
            await self.answer_dm(message)
        elif message.flags.voice:
            await self.voice_note(message)
        elif message.guild is not None and message.author.name == "compat-bob":
            log.info("got the guild message in #%s of %s", message.channel, message.guild)
            # A global 429 on the answer: every route waits, then it goes.
            if await self.control("/rest-fault", {"kind": "rate_limited", "scope": "global",
                                                  "retry_after": 0.3}) is None:
                return
            try:
                await message.channel.send(GUILD_ANSWER)
            except discord.HTTPException as err:
                return self.finish(f"guild answer after a global 429 failed: {err}")
            log.info("answered in the guild after a global 429")
            await self.control("/fault", {"kind": "reconnect"})
            log.info("asked the simulator for op 7")
        else:
            log.info("ignoring message %r", message.content)

    async def on_resumed(self):
        log.info("RESUMED")
        self.finish()

    async def answer_dm(self, message):
        log.info("got the DM from %s in %s", message.author, message.channel.id)
        # The reply meets a route 429 first: discord.py must wait
        # `retry_after` and send it again (it raises on a 429 without `Via`).
        path = f"/api/v10/channels/{message.channel.id}/messages"
        if await self.control("/rest-fault", {"kind": "rate_limited", "scope": "user",
                                              "retry_after": 0.3, "path_prefix": path}) is None:
            return
        try:
            sent = await message.channel.send(self.reply)
        except discord.HTTPException as err:
            return self.finish(f"channel.send failed: {err}")
        if sent.content != self.reply:
            return self.finish(f"REST answered a message with content {sent.content!r}")
        log.info("replied: message %s", sent.id)
        # "OggS": only the shape of the message matters here.
        body = {"author_id": "4242", "author_name": "compat-alice",
                "voice_ogg_base64": "T2dnUw==", "duration_secs": 1.5}
        await self.control("/dm", body)

    async def voice_note(self, message):
        files = message.attachments
        if len(files) != 1 or not (files[0].content_type or "").startswith("audio/"):
            return self.finish(f"voice note attachments look wrong: {files!r}")
        if not files[0].is_voice_message() or not files[0].duration or not files[0].waveform:
            return self.finish("voice note lacks duration or waveform")
        log.info("got the voice note: %s, %.1f s", files[0].content_type, files[0].duration)
        guilds = self.guilds
        if not guilds or not guilds[0].text_channels:
            return self.finish("no guild text channel from GUILD_CREATE")
        channel = guilds[0].text_channels[0]
        body = {"channel_id": str(channel.id), "author_id": "4343",
                "author_name": "compat-bob", "content": "hello guild"}
        await self.control("/guild-message", body)


async def beats_on_session(control, want, timeout):
    """Waits (bounded) until the identified connection has `want` beats."""
    deadline = time.monotonic() + timeout
    seen = 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        while time.monotonic() < deadline:
            async with http.get(control + "/stats") as resp:
                stats = await resp.json(content_type=None)
            live = [c for c in stats["connections"]
                    if (c["identifies"] > 0 or c["resumes"] > 0) and c["ended"] is None]
            seen = max((c["heartbeats"] for c in live), default=0)
            if seen >= want:
                return seen
            await asyncio.sleep(0.2)
    return seen


async def run(args):
    discord.http.Route.BASE = args.api
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(args.gateway)
    bot = Bot(args)
    async with bot:
        runner = asyncio.create_task(bot.start(args.token, reconnect=False))
        # The reply, or the client giving up (bad token, fatal close), or the timeout.
        replied = asyncio.create_task(bot.replied.wait())
        await asyncio.wait({replied, runner}, timeout=args.timeout, return_when=asyncio.FIRST_COMPLETED)
        replied.cancel()
        if runner.done():
            bot.failure = bot.failure or f"client stopped: {runner.exception()!r}"
        elif not bot.replied.is_set():
            what = "READY" if not bot.ready_seen.is_set() else "the DM (or the reply)"
            bot.failure = bot.failure or f"no {what} within {args.timeout} s"
        if bot.failure is None:
            interval_s = args.heartbeat_ms / 1000
            seen = await beats_on_session(args.control, args.beats, args.beats * interval_s * 2 + 10)
            if seen < args.beats:
                bot.failure = f"only {seen} heartbeats seen by the simulator"
            if runner.done():
                bot.failure = bot.failure or f"client stopped early: {runner.exception()!r}"
        await bot.close()
        try:
            await asyncio.wait_for(runner, timeout=10)
        except Exception as err:  # noqa: BLE001 — the close path; report, don't mask
            log.info("client task ended with %r", err)
    with open(args.result, "w") as out:
        json.dump({"channel_id": bot.channel_id, "reply": bot.reply, "failure": bot.failure,
                   "version": discord.__version__}, out)
    if bot.failure:
        log.error("FAIL: %s", bot.failure)
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gateway", required=True)
    ap.add_argument("--api", required=True)
    ap.add_argument("--control", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--heartbeat-ms", type=int, required=True)
    ap.add_argument("--beats", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--result", required=True)
    args = ap.parse_args()
    # A plain formatter: discord.py colours its logs even into a file.
    plain = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    discord.utils.setup_logging(level=logging.INFO, formatter=plain, root=True)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
