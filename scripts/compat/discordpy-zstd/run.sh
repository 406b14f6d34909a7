#!/usr/bin/env bash
# discord.py with the optional `zstandard` package, its default then:
# zstd-stream. The same bot and checks as ../discordpy/run.sh.
COMPAT_DISCORDPY_ZSTD=1 exec "$(dirname "$0")/../discordpy/run.sh" "$@"
