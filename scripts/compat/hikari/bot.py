"""A tiny hikari bot run against `smolcord sim` (see run.sh), with the
library's defaults (its own compression, identify pacing and REST retries).

hikari is an asyncio library of its own (not a discord.py fork). Each step
is bounded and logged as "STEP name: ok" or "FAIL name: why"; the run stops
at the first failure. Steps: READY (+ GUILD_CREATE); a DM in, a reply out;
a route 429 and a global 429 on the next replies (both retried by the
library); op 7 -> resume; a TCP drop with a DM sent while it is down
(replayed on resume); op 9 true (resume) and op 9 false (a fresh
identify); a withheld ACK (the library's zombie check, then a resume); op
8 answered by GUILD_MEMBERS_CHUNK; then two shards of 2 in one identify
bucket. Writes `{"channel_id", "reply", "steps"}` to `--result`.
"""

import argparse
import asyncio
import json
import logging
import sys

import aiohttp
import hikari

log = logging.getLogger("compat.hikari")
STEP_S = 20.0
ALICE = {"author_id": "4242", "author_name": "compat-alice"}


class Failed(Exception):
    pass


class Run:
    def __init__(self, args):
        self.args = args
        self.steps = []
        self.channel_id = None

    async def control(self, path, body):
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            async with http.post(self.args.control + path, json=body) as resp:
                answer = await resp.json(content_type=None)
                if resp.status != 200:
                    raise Failed(f"control {path} answered {resp.status}: {answer}")
                return answer

    async def step(self, name, body):
        try:
            await asyncio.wait_for(body(), timeout=STEP_S)
        except Exception as err:  # noqa: BLE001 — any failure is the step's verdict
            why = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
            self.steps.append({"name": name, "ok": False, "why": why})
            log.error("FAIL %s: %s", name, why)
            raise Failed(name) from err
        self.steps.append({"name": name, "ok": True})
        log.info("STEP %s: ok", name)

    def bot(self, **kwargs):
        return hikari.GatewayBot(
            self.args.token,
            rest_url=self.args.api,
            intents=hikari.Intents.GUILDS | hikari.Intents.DM_MESSAGES,
            banner=None,
            suppress_optimization_warning=True,
            **kwargs,
        )

    async def dm_and_reply(self, bot, content):
        waiter = bot.wait_for(hikari.DMMessageCreateEvent, timeout=STEP_S,
                              predicate=lambda e: e.message.content == content)
        waiting = asyncio.ensure_future(waiter)
        injected = await self.control("/dm", {**ALICE, "content": content})
        self.channel_id = injected["channel_id"]
        event = await waiting
        reply = f"echo: {content}"
        sent = await bot.rest.create_message(event.channel_id, reply)
        if sent.content != reply:
            raise Failed(f"REST gave back content {sent.content!r}")

    async def resumed_after(self, bot, fault):
        waiting = asyncio.ensure_future(bot.wait_for(hikari.ShardResumedEvent, timeout=STEP_S))
        await asyncio.sleep(0)
        await self.control("/fault", fault)
        await waiting

    async def single(self):
        bot = self.bot()
        await self.step("login, READY, GUILD_CREATE", lambda: self.login(bot))
        try:
            await self.step("DM in, reply out", lambda: self.dm_and_reply(bot, "compat-hikari-1"))

            async def route_429():
                await self.control("/rest-fault", {"kind": "rate_limited", "count": 1, "retry_after": 0.5})
                await self.dm_and_reply(bot, "compat-hikari-2")
            await self.step("a route 429, retried", route_429)

            async def global_429():
                await self.control("/rest-fault", {"kind": "rate_limited", "count": 1,
                                                   "retry_after": 0.5, "global": True})
                await self.dm_and_reply(bot, "compat-hikari-3")
            await self.step("a global 429, retried", global_429)

            await self.step("op 7 -> resume", lambda: self.resumed_after(bot, {"kind": "reconnect"}))

            async def gap():
                replayed = asyncio.ensure_future(bot.wait_for(
                    hikari.DMMessageCreateEvent, timeout=STEP_S,
                    predicate=lambda e: e.message.content == "compat-hikari-gap"))
                back = asyncio.ensure_future(bot.wait_for(hikari.ShardResumedEvent, timeout=STEP_S))
                await asyncio.sleep(0)
                await self.control("/fault", {"kind": "drop_tcp"})
                await self.control("/dm", {**ALICE, "content": "compat-hikari-gap"})
                await back
                await replayed
            await self.step("TCP drop, a DM while away, replayed on resume", gap)

            await self.step("op 9 true -> resume", lambda: self.resumed_after(
                bot, {"kind": "invalid_session", "resumable": True}))

            async def op9_false():
                ready = asyncio.ensure_future(bot.wait_for(hikari.ShardReadyEvent, timeout=STEP_S))
                await asyncio.sleep(0)
                await self.control("/fault", {"kind": "invalid_session", "resumable": False})
                await ready
            await self.step("op 9 false -> identify", op9_false)

            await self.step("a withheld ACK -> reconnect and resume", lambda: self.resumed_after(
                bot, {"kind": "drop_acks", "n": 1}))

            async def op8():
                guild = next(iter(bot.cache.get_guilds_view().values()))
                chunk = asyncio.ensure_future(bot.wait_for(hikari.MemberChunkEvent, timeout=10))
                await asyncio.sleep(0)
                # A prefix query: no privileged intent needed.
                await bot.request_guild_members(guild, query="s", limit=10, nonce="compat-hikari")
                event = await chunk
                if event.nonce != "compat-hikari":
                    raise Failed(f"chunk nonce {event.nonce!r}")
            await self.step("op 8 -> GUILD_MEMBERS_CHUNK", op8)
            await self.step(f"{self.args.beats} heartbeats on the live connection", self.beats)
        finally:
            await bot.close()

        sharded = self.bot()
        try:
            await self.step("two shards in one bucket", lambda: self.login(sharded, shard_ids=[0, 1], shard_count=2))
        finally:
            await sharded.close()

    async def beats(self):
        """Until the simulator counted `--beats` heartbeats on a live connection."""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            while True:
                async with http.get(self.args.control + "/stats") as resp:
                    stats = await resp.json(content_type=None)
                live = [c["heartbeats"] for c in stats["connections"]
                        if (c["identifies"] > 0 or c["resumes"] > 0) and c["ended"] is None]
                if max(live, default=0) >= self.args.beats:
                    return
                await asyncio.sleep(0.2)

    async def login(self, bot, **shards):
        await bot.start(**shards)
        if not bot.cache.get_guilds_view():
            # GUILD_CREATE may trail READY by a moment.
            await bot.wait_for(hikari.GuildAvailableEvent, timeout=STEP_S)


async def main(args):
    run = Run(args)
    failed = False
    try:
        await run.single()
    except Failed:
        failed = True
    with open(args.result, "w") as out:
        json.dump({"channel_id": run.channel_id, "reply": "echo: compat-hikari-3",
                   "steps": run.steps, "version": hikari.__version__}, out)
    return 1 if failed else 0


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True)
    ap.add_argument("--control", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--result", required=True)
    ap.add_argument("--beats", type=int, default=4)
    return ap.parse_args()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(asyncio.run(main(parse())))
