//! smolcord: a Discord gateway bridge on the single-threaded smol runtime.
#![forbid(unsafe_code)]
