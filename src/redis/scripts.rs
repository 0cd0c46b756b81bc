//! The Lua scripts: each operation on a thread is one script on the
//! thread's slot (every key it touches is derived from `KEYS[1]`, the
//! thread's base key, so they share its hash tag). `redis::Script` sends
//! `EVALSHA` and falls back to `EVAL` (loading the script) on `NOSCRIPT`.
//! Key suffixes: `docs/design.md`, *Redis layout*.
//!
//! A thread has nine keys whatever its size (`THREAD_KEYS` below), so
//! giving all of them one deadline (the TTL) costs the same for a thread
//! of ten checkpoints and one of ten thousand. Members and fields are
//! `ns \0 id` (and `ns \0 id \0 write` for writes): a namespace's ids are
//! one lexicographic range of a sorted set.
//!
//! `ARGV[1]` of every script is the TTL in milliseconds; the scripts take
//! it off before reading their own arguments. Writes give every key of the
//! thread that deadline (`0`: the thread keeps the deadline it has, or
//! none); reads refresh it when it is not `0`.

use std::sync::LazyLock;

use redis::Script;

/// The suffixes of a thread's keys, after its base `B`.
pub(crate) const THREAD_KEYS: [&str; 9] = [":ns", ":all", ":ids", ":ck", ":cf", ":par", ":bl", ":wz", ":w"];

/// Shared helpers, prepended to every script.
const LIB: &str = r#"
local b = KEYS[1]
local ttl = tonumber(table.remove(ARGV, 1))
local tk = {':ns', ':all', ':ids', ':ck', ':cf', ':par', ':bl', ':wz', ':w'}
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- every key of the thread gets one deadline, the same absolute instant
-- (`PEXPIREAT`: relative `PEXPIRE`s may land a millisecond apart): `ms`
-- from now, or (ms 0) the deadline the thread has (none: the keys stay
-- persistent)
local function touch(ms)
  if ms <= 0 then
    for _, k in ipairs(tk) do
      local t = redis.call('PTTL', b..k)
      if t == -1 then return end
      if t > 0 then ms = t break end
    end
    if ms <= 0 then return end
  end
  local at = now_ms() + ms
  for _, k in ipairs(tk) do redis.call('PEXPIREAT', b..k, at) end
end
local function lo(ns) return '('..ns..'\0' end
local function hi(ns) return '('..ns..'\1' end
-- a range bound on ids of `ns`: `+`, `-`, `(id` or `[id`
local function bound(ns, x, top)
  if x == '+' then return hi(ns) end
  if x == '-' then return lo(ns) end
  return string.sub(x, 1, 1)..ns..'\0'..string.sub(x, 2)
end
local function writes_of(key)
  local ms = redis.call('ZRANGEBYLEX', b..':wz', '['..key..'\0', '('..key..'\1')
  local out = {}
  if #ms == 0 then return out end
  local vals = {}
  for i = 1, #ms, 1000 do
    local chunk = redis.call('HMGET', b..':w', unpack(ms, i, math.min(i + 999, #ms)))
    for j = 1, #chunk do vals[#vals + 1] = chunk[j] end
  end
  local cut = #key + 2
  for i = 1, #ms do
    if vals[i] then
      out[#out + 1] = string.sub(ms[i], cut)
      out[#out + 1] = vals[i]
    end
  end
  return out
end
local function item(ns, id, full, only)
  local key = ns..'\0'..id
  local rec = redis.call('HGET', b..':ck', key)
  if not rec then return false end
  if full ~= '1' then return {id, ns, rec} end
  local fields, names = {}, {}
  local fl = redis.call('HGET', b..':cf', key)
  if fl then
    for f in string.gmatch(fl, '[^\n]+') do
      if not only or only[string.match(f, '^[^:]*')] then
        fields[#fields + 1] = f
        names[#names + 1] = ns..'\0'..f
      end
    end
  end
  local vals = {}
  for i = 1, #names, 1000 do
    local chunk = redis.call('HMGET', b..':bl', unpack(names, i, math.min(i + 999, #names)))
    for j = 1, #chunk do vals[#vals + 1] = chunk[j] end
  end
  return {id, ns, rec, fields, vals, writes_of(key)}
end
local removed = {}
local function drop_writes(key)
  local ms = redis.call('ZRANGEBYLEX', b..':wz', '['..key..'\0', '('..key..'\1')
  for i = 1, #ms, 1000 do
    local part = {unpack(ms, i, math.min(i + 999, #ms))}
    redis.call('ZREM', b..':wz', unpack(part))
    redis.call('HDEL', b..':w', unpack(part))
  end
end
local function drop_cp(ns, id)
  local key = ns..'\0'..id
  if redis.call('ZREM', b..':ids', key) == 1 then removed[#removed + 1] = id..'\0'..ns end
  redis.call('ZREM', b..':all', id..'\0'..ns)
  redis.call('HDEL', b..':ck', key)
  redis.call('HDEL', b..':cf', key)
  redis.call('HDEL', b..':par', key)
  drop_writes(key)
end
-- the ids of `ns` (or those below `below`), and the checkpoint ids of its
-- writes, each once
local function ids_of(ns, below)
  local top = below and ('('..ns..'\0'..below) or hi(ns)
  local cut = #ns + 2
  local out = {}
  for _, m in ipairs(redis.call('ZRANGEBYLEX', b..':ids', lo(ns), top)) do
    out[#out + 1] = string.sub(m, cut)
  end
  return out
end
local function write_ids_of(ns, below)
  local top = below and ('('..ns..'\0'..below) or hi(ns)
  local cut = #ns + 2
  local out, seen = {}, {}
  for _, m in ipairs(redis.call('ZRANGEBYLEX', b..':wz', lo(ns), top)) do
    local rest = string.sub(m, cut)
    local id = string.sub(rest, 1, string.find(rest, '\0', 1, true) - 1)
    if not seen[id] then
      seen[id] = true
      out[#out + 1] = id
    end
  end
  return out
end
-- values no remaining checkpoint of the namespaces `nss` (a set) names,
-- in one pass over the thread's values; a namespace goes from `:ns` when
-- nothing of it is left
local function gc(nss)
  local keep, left = {}, {}
  for ns in pairs(nss) do
    local keys = {}
    for _, id in ipairs(ids_of(ns)) do keys[#keys + 1] = ns..'\0'..id end
    left[ns] = #keys > 0
    for i = 1, #keys, 1000 do
      for _, fl in ipairs(redis.call('HMGET', b..':cf', unpack(keys, i, math.min(i + 999, #keys)))) do
        if fl then
          for f in string.gmatch(fl, '[^\n]+') do keep[ns..'\0'..f] = true end
        end
      end
    end
  end
  local drop = {}
  for _, f in ipairs(redis.call('HKEYS', b..':bl')) do
    local ns = string.sub(f, 1, string.find(f, '\0', 1, true) - 1)
    if nss[ns] and not keep[f] then drop[#drop + 1] = f end
  end
  for i = 1, #drop, 1000 do redis.call('HDEL', b..':bl', unpack(drop, i, math.min(i + 999, #drop))) end
  for ns in pairs(nss) do
    if not left[ns] and #redis.call('ZRANGEBYLEX', b..':wz', lo(ns), hi(ns), 'LIMIT', 0, 1) == 0 then
      redis.call('SREM', b..':ns', ns)
    end
  end
end
local function empty_flag()
  if redis.call('EXISTS', b..':ns') == 0 then return 1 end
  return 0
end
"#;

fn script(body: &str) -> Script {
    Script::new(&format!("{LIB}{body}"))
}

/// `ARGV`: ns, id, record, blob field list (`\n`-joined), has parent
/// (`1`/`0`), parent, thread id. The values themselves are stored by
/// `HSETNX`s in the same `MULTI`/`EXEC`, before the script (large
/// arguments are slow to hand to Lua). On one server (not a cluster) `KEYS[2..6]` are the global
/// thread index, checkpoint index, generations, expiry and the thread's
/// member set, updated in the same script; on a cluster they are in
/// another slot and the caller updates them first.
pub(crate) static PUT: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local ns, id = ARGV[1], ARGV[2]
local key = ns..'\0'..id
redis.call('SADD', b..':ns', ns)
redis.call('ZADD', b..':all', 0, id..'\0'..ns)
redis.call('ZADD', b..':ids', 0, key)
redis.call('HSET', b..':ck', key, ARGV[3])
redis.call('HSET', b..':cf', key, ARGV[4])
if ARGV[5] == '1' then
  redis.call('HSET', b..':par', key, ARGV[6])
else
  redis.call('HDEL', b..':par', key)
end
if #KEYS > 1 then
  local thread = ARGV[7]
  local member = id..'\0'..thread..'\0'..ns
  redis.call('ZADD', KEYS[2], 0, thread)
  redis.call('ZADD', KEYS[3], 0, member)
  redis.call('HINCRBY', KEYS[4], thread, 1)
  if ttl > 0 then
    redis.call('ZADD', KEYS[5], now_ms() + ttl, thread)
    redis.call('SADD', KEYS[6], member)
  end
end
touch(ttl)
return 1
"#,
    )
});

/// `ARGV`: ns, checkpoint id, then (field, value, special) triples: a
/// special write replaces what is stored, a regular one keeps it.
pub(crate) static PUT_WRITES: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local ns, id = ARGV[1], ARGV[2]
local key = ns..'\0'..id..'\0'
redis.call('SADD', b..':ns', ns)
for i = 3, #ARGV, 3 do
  local m = key..ARGV[i]
  redis.call('ZADD', b..':wz', 0, m)
  if ARGV[i + 2] == '1' then
    redis.call('HSET', b..':w', m, ARGV[i + 1])
  else
    redis.call('HSETNX', b..':w', m, ARGV[i + 1])
  end
end
touch(ttl)
return 1
"#,
    )
});

/// Reads checkpoints. `ARGV[1]` is the mode:
/// * `range`: ns, max, min, limit, full — ids of ns by `ZREVRANGEBYLEX`
///   (bounds `+`, `-`, `(id`, `[id`);
/// * `all`: max, min, limit, full — `id \0 ns` members of every ns;
/// * `ids`: full, then (ns, id) pairs;
/// * `walk`: ns, start id (`""`: latest), limit, then the escaped channels
///   whose values to fetch (none: every channel) — the parent chain.
///
/// Returns `{examined, last member or next id, items...}`; an item is
/// `{id, ns, record[, fields, values, writes]}`. With a TTL, a thread that
/// exists gets its deadline renewed (refresh on read).
pub(crate) static READ: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local mode = ARGV[1]
local out = {0, ''}
if ttl > 0 and redis.call('EXISTS', b..':ns') == 1 then touch(ttl) end
if mode == 'range' then
  local ns = ARGV[2]
  local ms = redis.call('ZREVRANGEBYLEX', b..':ids', bound(ns, ARGV[3]), bound(ns, ARGV[4]), 'LIMIT', 0,
    tonumber(ARGV[5]))
  out[1] = #ms
  local cut = #ns + 2
  for _, m in ipairs(ms) do
    local id = string.sub(m, cut)
    out[2] = id
    local it = item(ns, id, ARGV[6])
    if it then out[#out + 1] = it end
  end
elseif mode == 'all' then
  local ms = redis.call('ZREVRANGEBYLEX', b..':all', ARGV[2], ARGV[3], 'LIMIT', 0, tonumber(ARGV[4]))
  out[1] = #ms
  if #ms > 0 then out[2] = ms[#ms] end
  for _, m in ipairs(ms) do
    local at = string.find(m, '\0', 1, true)
    local it = item(string.sub(m, at + 1), string.sub(m, 1, at - 1), ARGV[5])
    if it then out[#out + 1] = it end
  end
elseif mode == 'ids' then
  for i = 3, #ARGV, 2 do
    local it = item(ARGV[i], ARGV[i + 1], ARGV[2])
    if it then out[#out + 1] = it end
  end
elseif mode == 'walk' then
  local ns, id, left = ARGV[2], ARGV[3], tonumber(ARGV[4])
  if id == '' then
    local last = redis.call('ZREVRANGEBYLEX', b..':ids', hi(ns), lo(ns), 'LIMIT', 0, 1)
    if #last == 0 then return out end
    id = string.sub(last[1], #ns + 2)
  end
  local only = nil
  if #ARGV > 4 then
    only = {}
    for i = 5, #ARGV do only[ARGV[i]] = true end
  end
  local seen = {}
  while id and left > 0 and not seen[id] do
    seen[id] = true
    local it = item(ns, id, '1', only)
    if not it then id = nil break end
    out[#out + 1] = it
    left = left - 1
    id = redis.call('HGET', b..':par', ns..'\0'..id)
  end
  if id and not seen[id] then out[2] = id end
end
return out
"#,
    )
});

/// Removes the thread; returns the `id \0 ns` members it held. `ARGV`:
/// the thread id. On one server `KEYS[2..6]` are the global index keys (as
/// for [`PUT`]), whose entries for the thread go in the same script (the
/// reply is then empty).
pub(crate) static DELETE_THREAD: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local members = redis.call('ZRANGE', b..':all', 0, -1)
local names = {}
for _, k in ipairs(tk) do names[#names + 1] = b..k end
redis.call('UNLINK', unpack(names))
if #KEYS > 1 then
  local thread = ARGV[1]
  local global = {}
  for _, m in ipairs(members) do
    local at = string.find(m, '\0', 1, true)
    global[#global + 1] = string.sub(m, 1, at)..thread..string.sub(m, at)
  end
  for i = 1, #global, 1000 do redis.call('ZREM', KEYS[3], unpack(global, i, math.min(i + 999, #global))) end
  redis.call('ZREM', KEYS[2], thread)
  redis.call('HDEL', KEYS[4], thread)
  redis.call('ZREM', KEYS[5], thread)
  redis.call('UNLINK', KEYS[6])
  return {}
end
return members
"#,
    )
});

/// `ARGV`: (ns, id) pairs: removes those checkpoints with their writes,
/// then the values no remaining checkpoint names. Returns `{thread now
/// empty (1/0), removed members...}`.
pub(crate) static DROP: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local touched = {}
for i = 1, #ARGV, 2 do
  drop_cp(ARGV[i], ARGV[i + 1])
  touched[ARGV[i]] = true
end
gc(touched)
touch(ttl)
local out = {empty_flag()}
for _, m in ipairs(removed) do out[#out + 1] = m end
return out
"#,
    )
});

/// `ARGV`: directives `D, ns` (the namespace goes whole) or `K, ns, head,
/// n, id1..idn` (keep the head, the n ids, and what is newer; older
/// checkpoints and writes go; a kept checkpoint whose parent is gone
/// forgets it, in `:par` and in its record). Returns as [`DROP`].
pub(crate) static PRUNE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
-- the end of the record part starting at `at` (a u32 big-endian length,
-- then the bytes)
local function part_end(rec, at)
  local b1, b2, b3, b4 = string.byte(rec, at, at + 3)
  return at + 4 + ((b1 * 256 + b2) * 256 + b3) * 256 + b4
end
-- the record's first two parts, has parent and parent id, become `0`, ``
local function forget_parent(key)
  redis.call('HDEL', b..':par', key)
  local rec = redis.call('HGET', b..':ck', key)
  if rec then
    local rest = part_end(rec, part_end(rec, 1))
    redis.call('HSET', b..':ck', key, '\0\0\0\1'..'0'..'\0\0\0\0'..string.sub(rec, rest))
  end
end
local i = 1
local touched = {}
while i <= #ARGV do
  local op, ns = ARGV[i], ARGV[i + 1]
  if op == 'D' then
    i = i + 2
    for _, id in ipairs(ids_of(ns)) do drop_cp(ns, id) end
    for _, id in ipairs(write_ids_of(ns)) do drop_cp(ns, id) end
    touched[ns] = true
  else
    local head, n = ARGV[i + 2], tonumber(ARGV[i + 3])
    local keep = {}
    keep[head] = true
    for j = 1, n do keep[ARGV[i + 3 + j]] = true end
    i = i + 4 + n
    for _, id in ipairs(ids_of(ns, head)) do
      if not keep[id] then drop_cp(ns, id) end
    end
    for _, id in ipairs(write_ids_of(ns, head)) do
      if not keep[id] then drop_writes(ns..'\0'..id) end
    end
    for id in pairs(keep) do
      local key = ns..'\0'..id
      local parent = redis.call('HGET', b..':par', key)
      if parent and redis.call('HEXISTS', b..':ck', ns..'\0'..parent) == 0 then forget_parent(key) end
    end
    touched[ns] = true
  end
end
gc(touched)
touch(ttl)
local out = {empty_flag()}
for _, m in ipairs(removed) do out[#out + 1] = m end
return out
"#,
    )
});

/// Every key of the thread without values: `{{ns \0 id ...}, {parent
/// pairs}, {write pairs}}` (write fields `ns \0 id \0 task:idx`).
pub(crate) static KEYS_OF: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
return {redis.call('ZRANGE', b..':ids', 0, -1), redis.call('HGETALL', b..':par'), redis.call('HGETALL', b..':w')}
"#,
    )
});

/// The whole thread for a copy, read at one instant: `{ns members, all
/// members, ids members, {ck pairs}, {cf pairs}, {par pairs}, {bl pairs},
/// wz members, {w pairs}}` (the order of `THREAD_KEYS`).
pub(crate) static SNAPSHOT: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
return {redis.call('SMEMBERS', b..':ns'), redis.call('ZRANGE', b..':all', 0, -1),
  redis.call('ZRANGE', b..':ids', 0, -1), redis.call('HGETALL', b..':ck'), redis.call('HGETALL', b..':cf'),
  redis.call('HGETALL', b..':par'), redis.call('HGETALL', b..':bl'), redis.call('ZRANGE', b..':wz', 0, -1),
  redis.call('HGETALL', b..':w')}
"#,
    )
});

/// Writes a copied thread into an empty target, whole, in one script:
/// `ARGV` is nine counts (the items of each key, in the order of
/// `THREAD_KEYS`; hash items are field/value pairs) followed by the items.
/// Returns 0 (nothing written) when the target holds checkpoints.
pub(crate) static COPY_IN: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
if redis.call('EXISTS', b..':all') == 1 then return 0 end
local at = 10
for k = 1, 9 do
  local n = tonumber(ARGV[k])
  local key = b..tk[k]
  local set, zset = k == 1, k == 2 or k == 3 or k == 8
  local step = (set or zset) and 1 or 2
  for i = at, at + n - 1, 1000 do
    local last = math.min(i + 999, at + n - 1)
    if set then
      redis.call('SADD', key, unpack(ARGV, i, last))
    elseif zset then
      local args = {}
      for j = i, last do
        args[#args + 1] = 0
        args[#args + 1] = ARGV[j]
      end
      redis.call('ZADD', key, unpack(args))
    else
      redis.call('HSET', key, unpack(ARGV, i, last))
    end
  end
  at = at + n
end
touch(ttl)
return 1
"#,
    )
});

/// The index side of a sweep, on the index slot. `KEYS`: the expiry zset,
/// the checkpoint index, the thread index, the generation hash, the
/// thread's member set. `ARGV`: the thread, the generation the sweep saw,
/// what to do — `gone` (remove the thread's entries), `persist` (the
/// thread lives on without a deadline: forget its expiry) or a new
/// deadline (ms since the epoch) — then the members of the checkpoint
/// index naming checkpoints the thread no longer holds, to remove. Does
/// nothing, and returns 0, when a write bumped the generation since.
pub(crate) static SWEEP: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local expiry, checkpoints, threads, gens, tm = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local thread, gen, what = ARGV[1], ARGV[2], ARGV[3]
if (redis.call('HGET', gens, thread) or '') ~= gen then return 0 end
for i = 4, #ARGV, 1000 do
  local last = math.min(i + 999, #ARGV)
  redis.call('ZREM', checkpoints, unpack(ARGV, i, last))
  redis.call('SREM', tm, unpack(ARGV, i, last))
end
if what == 'gone' then
  redis.call('ZREM', threads, thread)
  redis.call('HDEL', gens, thread)
  redis.call('UNLINK', tm)
  redis.call('ZREM', expiry, thread)
elseif what == 'persist' then
  redis.call('UNLINK', tm)
  redis.call('ZREM', expiry, thread)
else
  redis.call('ZADD', expiry, tonumber(what), thread)
end
return 1
"#,
    )
});
