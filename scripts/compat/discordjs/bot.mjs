// A tiny discord.js bot run against `smolcord sim` (see run.sh), with the
// library's defaults (its own compression choice, its own identify
// throttle, its own REST queue). Each step is bounded and logged as
// "STEP name: ok" or "FAIL name: why"; the run stops at the first failure.
//
// Steps: READY (+ GUILD_CREATE); a DM in, a reply out; a route 429 and a
// global 429 on the next replies (both retried by the library); op 7 ->
// resume; a TCP drop with a DM sent while it is down (replayed on resume);
// op 9 true (resume) and op 9 false (a fresh identify); a withheld ACK
// (the library's zombie check, then a resume); op 8 answered by
// GUILD_MEMBERS_CHUNK; then two shards of 2 in one identify bucket.
//
// Usage: node bot.mjs --api HTTP_BASE/api --control CONTROL --token T
//        --result FILE

import { Client, GatewayIntentBits, Partials, Events } from "discord.js";
import { writeFileSync } from "node:fs";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => {
    if (arg.startsWith("--")) pairs.push([arg.slice(2), all[i + 1]]);
    return pairs;
  }, []),
);
const STEP_MS = 20_000;
const steps = [];

function log(...parts) {
  console.log(new Date().toISOString(), ...parts);
}

async function control(path, body) {
  const resp = await fetch(args.control + path, {
    method: body === undefined ? "GET" : "POST",
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await resp.text();
  if (!resp.ok) throw new Error(`control ${path} answered ${resp.status}: ${text}`);
  return text ? JSON.parse(text) : null;
}

/** Resolves with the first `event` emitted by `emitter` that `pred` accepts, or rejects after STEP_MS. */
function next(emitter, event, pred = () => true, what = event) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, handler);
      reject(new Error(`no ${what} within ${STEP_MS} ms`));
    }, STEP_MS);
    function handler(...values) {
      if (!pred(...values)) return;
      clearTimeout(timer);
      emitter.off(event, handler);
      resolve(values);
    }
    emitter.on(event, handler);
  });
}

async function step(name, body) {
  try {
    await body();
    steps.push({ name, ok: true });
    log(`STEP ${name}: ok`);
  } catch (err) {
    steps.push({ name, ok: false, why: String(err?.message ?? err) });
    log(`FAIL ${name}: ${err?.stack ?? err}`);
    throw err;
  }
}

function client(shards) {
  return new Client({
    intents: [
      GatewayIntentBits.Guilds,
      GatewayIntentBits.DirectMessages,
    ],
    // DM channels are not cached: without Partials.Channel discord.js drops DMs.
    partials: [Partials.Channel],
    rest: { api: args.api },
    ...(shards ? { shards: shards.ids, shardCount: shards.count } : {}),
  });
}

const alice = { author_id: "4242", author_name: "compat-alice" };
let dmChannel = null;

async function dmAndReply(bot, content, reply) {
  const got = next(bot, Events.MessageCreate, (m) => m.content === content, `the DM "${content}"`);
  const injected = await control("/dm", { ...alice, content });
  dmChannel = injected.channel_id;
  const [message] = await got;
  const sent = await message.channel.send(reply);
  if (sent.content !== reply) throw new Error(`REST gave back content ${JSON.stringify(sent.content)}`);
}

async function resumed(bot, fault, what) {
  const shard = bot.ws.shards.first();
  const back = next(bot, Events.ShardResume, () => true, `a resume after ${what}`);
  await control("/fault", fault);
  await back;
  return shard;
}

async function main() {
  const bot = client();
  bot.on(Events.Error, (err) => log("ERROR client:", err));
  bot.on(Events.Warn, (w) => log("WARN client:", w));
  await step("login, READY, GUILD_CREATE", async () => {
    const ready = next(bot, Events.ClientReady, () => true, "READY");
    await bot.login(args.token);
    await ready;
    if (bot.guilds.cache.size < 1) throw new Error("no guild from GUILD_CREATE");
  });
  await step("DM in, reply out", () => dmAndReply(bot, "compat-djs-1", "echo: compat-djs-1"));
  await step("a route 429, retried", async () => {
    await control("/rest-fault", { kind: "rate_limited", count: 1, retry_after: 0.5 });
    await dmAndReply(bot, "compat-djs-2", "echo: compat-djs-2");
  });
  await step("a global 429, retried", async () => {
    await control("/rest-fault", { kind: "rate_limited", count: 1, retry_after: 0.5, global: true });
    await dmAndReply(bot, "compat-djs-3", "echo: compat-djs-3");
  });
  await step("op 7 -> resume", () => resumed(bot, { kind: "reconnect" }, "op 7"));
  await step("TCP drop, a DM while away, replayed on resume", async () => {
    const replayed = next(bot, Events.MessageCreate, (m) => m.content === "compat-djs-gap", "the gap DM");
    const back = next(bot, Events.ShardResume, () => true, "a resume after the TCP drop");
    await control("/fault", { kind: "drop_tcp" });
    await control("/dm", { ...alice, content: "compat-djs-gap" });
    await back;
    await replayed;
  });
  await step("op 9 true -> resume", () => resumed(bot, { kind: "invalid_session", resumable: true }, "op 9 true"));
  await step("op 9 false -> identify", async () => {
    const ready = next(bot, Events.ShardReady, () => true, "READY after op 9 false");
    await control("/fault", { kind: "invalid_session", resumable: false });
    await ready;
  });
  await step("a withheld ACK -> reconnect and resume", async () => {
    // The library notices the unanswered beat at its next one, then resumes.
    const back = next(bot, Events.ShardResume, () => true, "a resume after the withheld ACK");
    await control("/fault", { kind: "drop_acks", n: 1 });
    await back;
  });
  await step("op 8 -> GUILD_MEMBERS_CHUNK", async () => {
    // A prefix query: no privileged intent needed (all members would need
    // GUILD_MEMBERS, which the simulator, like Discord, refuses unless enabled).
    const guild = bot.guilds.cache.first();
    const members = await guild.members.fetch({ query: "s", limit: 10, time: 10_000 });
    log(`op 8 answered: ${members.size} member(s)`);
  });
  await step(`${args.beats} heartbeats on the live connection`, async () => {
    const deadline = Date.now() + STEP_MS;
    for (;;) {
      const stats = await control("/stats");
      const live = stats.connections
        .filter((c) => (c.identifies > 0 || c.resumes > 0) && c.ended === null)
        .map((c) => c.heartbeats);
      if (Math.max(0, ...live) >= Number(args.beats)) return;
      if (Date.now() > deadline) throw new Error(`only ${Math.max(0, ...live)} heartbeats`);
      await new Promise((r) => setTimeout(r, 200));
    }
  });
  await bot.destroy();

  const sharded = client({ ids: [0, 1], count: 2 });
  await step("two shards in one bucket", async () => {
    let ready = 0;
    const both = new Promise((resolve) =>
      sharded.on(Events.ShardReady, () => {
        ready += 1;
        if (ready === 2) resolve();
      }),
    );
    await sharded.login(args.token);
    await Promise.race([
      both,
      new Promise((_, reject) => setTimeout(() => reject(new Error(`${ready} of 2 shards READY`)), 30_000)),
    ]);
  });
  await sharded.destroy();
}

let status = 0;
try {
  await main();
} catch {
  status = 1;
}
writeFileSync(args.result, JSON.stringify({ channel_id: dmChannel, reply: "echo: compat-djs-3", steps }));
process.exit(status);
