//! The Lua scripts: each operation on a thread is one script on the
//! thread's slot (every key it touches is derived from `KEYS[1]`, the
//! thread's base key, so they share its hash tag). `redis::Script` sends
//! `EVALSHA` and falls back to `EVAL` (loading the script) on `NOSCRIPT`.
//! Key suffixes: `docs/design.md`, *Redis layout*.

use std::sync::LazyLock;

use redis::Script;

/// Shared helpers, prepended to every script.
const LIB: &str = r#"
local b = KEYS[1]
local function ens_of(ns) return redis.call('HGET', b..':nsx', ns) end
local function item(ns, id, full, only)
  local ens = ens_of(ns)
  if not ens then return false end
  local rec = redis.call('HGET', b..':ck:'..ens, id)
  if not rec then return false end
  if full ~= '1' then return {id, ns, rec} end
  local fields = {}
  local fl = redis.call('HGET', b..':cf:'..ens, id)
  if fl then
    for f in string.gmatch(fl, '[^\n]+') do
      if not only or only[string.match(f, '^[^:]*')] then fields[#fields + 1] = f end
    end
  end
  local vals = {}
  for i = 1, #fields, 1000 do
    local chunk = redis.call('HMGET', b..':bl:'..ens, unpack(fields, i, math.min(i + 999, #fields)))
    for j = 1, #chunk do vals[#vals + 1] = chunk[j] end
  end
  local writes = redis.call('HGETALL', b..':w:'..ens..':'..id)
  return {id, ns, rec, fields, vals, writes}
end
local removed = {}
local function drop_cp(ns, ens, id)
  if redis.call('ZREM', b..':ids:'..ens, id) == 1 then removed[#removed + 1] = id..'\0'..ns end
  redis.call('ZREM', b..':all', id..'\0'..ns)
  redis.call('HDEL', b..':ck:'..ens, id)
  redis.call('HDEL', b..':cf:'..ens, id)
  redis.call('HDEL', b..':par:'..ens, id)
  redis.call('UNLINK', b..':w:'..ens..':'..id)
  redis.call('ZREM', b..':wi:'..ens, id)
end
local function gc(ns, ens)
  local keep = {}
  for _, fl in ipairs(redis.call('HVALS', b..':cf:'..ens)) do
    for f in string.gmatch(fl, '[^\n]+') do keep[f] = true end
  end
  for _, f in ipairs(redis.call('HKEYS', b..':bl:'..ens)) do
    if not keep[f] then redis.call('HDEL', b..':bl:'..ens, f) end
  end
  if redis.call('ZCARD', b..':ids:'..ens) == 0 and redis.call('ZCARD', b..':wi:'..ens) == 0 then
    redis.call('UNLINK', b..':ids:'..ens, b..':ck:'..ens, b..':cf:'..ens, b..':par:'..ens, b..':bl:'..ens,
      b..':wi:'..ens)
    redis.call('HDEL', b..':nsx', ns)
  end
end
local function empty_flag()
  if redis.call('EXISTS', b..':nsx') == 0 then return 1 end
  return 0
end
"#;

fn script(body: &str) -> Script {
    Script::new(&format!("{LIB}{body}"))
}

/// `ARGV`: ns, ens, id, record, blob field list (`\n`-joined), has parent
/// (`1`/`0`), parent, then (field, value) blob pairs stored if absent.
pub(crate) static PUT: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local ns, ens, id = ARGV[1], ARGV[2], ARGV[3]
redis.call('HSET', b..':nsx', ns, ens)
redis.call('ZADD', b..':all', 0, id..'\0'..ns)
redis.call('ZADD', b..':ids:'..ens, 0, id)
redis.call('HSET', b..':ck:'..ens, id, ARGV[4])
redis.call('HSET', b..':cf:'..ens, id, ARGV[5])
if ARGV[6] == '1' then
  redis.call('HSET', b..':par:'..ens, id, ARGV[7])
else
  redis.call('HDEL', b..':par:'..ens, id)
end
for i = 8, #ARGV, 2 do redis.call('HSETNX', b..':bl:'..ens, ARGV[i], ARGV[i + 1]) end
return 1
"#,
    )
});

/// `ARGV`: ns, ens, checkpoint id, then (field, value, special) triples: a
/// special write replaces what is stored, a regular one keeps it.
pub(crate) static PUT_WRITES: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local ns, ens, id = ARGV[1], ARGV[2], ARGV[3]
redis.call('HSET', b..':nsx', ns, ens)
redis.call('ZADD', b..':wi:'..ens, 0, id)
local wk = b..':w:'..ens..':'..id
for i = 4, #ARGV, 3 do
  if ARGV[i + 2] == '1' then
    redis.call('HSET', wk, ARGV[i], ARGV[i + 1])
  else
    redis.call('HSETNX', wk, ARGV[i], ARGV[i + 1])
  end
end
return 1
"#,
    )
});

/// Reads checkpoints. `ARGV[1]` is the mode:
/// * `range`: ns, max, min, limit, full — ids of ns by `ZREVRANGEBYLEX`;
/// * `all`: max, min, limit, full — `id \0 ns` members of every ns;
/// * `ids`: full, then (ns, id) pairs;
/// * `walk`: ns, start id (`""`: latest), limit, then the escaped channels
///   whose values to fetch (none: every channel) — the parent chain.
///
/// Returns `{examined, last member or next id, items...}`; an item is
/// `{id, ns, record[, fields, values, writes]}`.
pub(crate) static READ: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local mode = ARGV[1]
local out = {0, ''}
if mode == 'range' then
  local ens = ens_of(ARGV[2])
  if not ens then return out end
  local ids = redis.call('ZREVRANGEBYLEX', b..':ids:'..ens, ARGV[3], ARGV[4], 'LIMIT', 0, tonumber(ARGV[5]))
  out[1] = #ids
  if #ids > 0 then out[2] = ids[#ids] end
  for _, id in ipairs(ids) do
    local it = item(ARGV[2], id, ARGV[6])
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
  local ens = ens_of(ns)
  if not ens then return out end
  if id == '' then
    local last = redis.call('ZREVRANGEBYLEX', b..':ids:'..ens, '+', '-', 'LIMIT', 0, 1)
    if #last == 0 then return out end
    id = last[1]
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
    id = redis.call('HGET', b..':par:'..ens, id)
  end
  if id and not seen[id] then out[2] = id end
end
return out
"#,
    )
});

/// Removes the thread; returns the `id \0 ns` members it held.
pub(crate) static DELETE_THREAD: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local nsx = redis.call('HGETALL', b..':nsx')
local members = redis.call('ZRANGE', b..':all', 0, -1)
for i = 1, #nsx, 2 do
  local ens = nsx[i + 1]
  for _, id in ipairs(redis.call('ZRANGE', b..':wi:'..ens, 0, -1)) do
    redis.call('UNLINK', b..':w:'..ens..':'..id)
  end
  redis.call('UNLINK', b..':ids:'..ens, b..':ck:'..ens, b..':cf:'..ens, b..':par:'..ens, b..':bl:'..ens,
    b..':wi:'..ens)
end
redis.call('UNLINK', b..':nsx', b..':all')
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
  local ens = ens_of(ARGV[i])
  if ens then
    drop_cp(ARGV[i], ens, ARGV[i + 1])
    touched[ARGV[i]] = ens
  end
end
for ns, ens in pairs(touched) do gc(ns, ens) end
local out = {empty_flag()}
for _, m in ipairs(removed) do out[#out + 1] = m end
return out
"#,
    )
});

/// `ARGV`: directives `D, ns` (the namespace goes whole) or `K, ns, head,
/// n, id1..idn` (keep the head, the n ids, and what is newer; older
/// checkpoints and writes go). Returns as [`DROP`].
pub(crate) static PRUNE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local i = 1
while i <= #ARGV do
  local op, ns = ARGV[i], ARGV[i + 1]
  local ens = ens_of(ns)
  if op == 'D' then
    i = i + 2
    if ens then
      for _, id in ipairs(redis.call('ZRANGE', b..':ids:'..ens, 0, -1)) do drop_cp(ns, ens, id) end
      for _, id in ipairs(redis.call('ZRANGE', b..':wi:'..ens, 0, -1)) do drop_cp(ns, ens, id) end
      gc(ns, ens)
    end
  else
    local head, n = ARGV[i + 2], tonumber(ARGV[i + 3])
    local keep = {}
    keep[head] = true
    for j = 1, n do keep[ARGV[i + 3 + j]] = true end
    i = i + 4 + n
    if ens then
      for _, id in ipairs(redis.call('ZRANGEBYLEX', b..':ids:'..ens, '-', '('..head)) do
        if not keep[id] then drop_cp(ns, ens, id) end
      end
      for _, id in ipairs(redis.call('ZRANGEBYLEX', b..':wi:'..ens, '-', '('..head)) do
        if not keep[id] then
          redis.call('UNLINK', b..':w:'..ens..':'..id)
          redis.call('ZREM', b..':wi:'..ens, id)
        end
      end
      gc(ns, ens)
    end
  end
end
local out = {empty_flag()}
for _, m in ipairs(removed) do out[#out + 1] = m end
return out
"#,
    )
});

/// Every key of the thread without values: `{ns, {ids}, {parent pairs},
/// {{id, {write pairs}}...}}` per namespace.
pub(crate) static THREAD_KEYS: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local out = {}
local nsx = redis.call('HGETALL', b..':nsx')
for i = 1, #nsx, 2 do
  local ns, ens = nsx[i], nsx[i + 1]
  local ws = {}
  for _, id in ipairs(redis.call('ZRANGE', b..':wi:'..ens, 0, -1)) do
    ws[#ws + 1] = {id, redis.call('HGETALL', b..':w:'..ens..':'..id)}
  end
  out[#out + 1] = {ns, redis.call('ZRANGE', b..':ids:'..ens, 0, -1), redis.call('HGETALL', b..':par:'..ens), ws}
end
return out
"#,
    )
});

/// The whole thread for a copy, read at one instant: per namespace
/// `{ns, ens, {ck pairs}, {cf pairs}, {par pairs}, {bl pairs}, {{id,
/// {write pairs}}...}}`.
pub(crate) static SNAPSHOT: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local out = {}
local nsx = redis.call('HGETALL', b..':nsx')
for i = 1, #nsx, 2 do
  local ns, ens = nsx[i], nsx[i + 1]
  local ws = {}
  for _, id in ipairs(redis.call('ZRANGE', b..':wi:'..ens, 0, -1)) do
    ws[#ws + 1] = {id, redis.call('HGETALL', b..':w:'..ens..':'..id)}
  end
  out[#out + 1] = {ns, ens, redis.call('HGETALL', b..':ck:'..ens), redis.call('HGETALL', b..':cf:'..ens),
    redis.call('HGETALL', b..':par:'..ens), redis.call('HGETALL', b..':bl:'..ens), ws}
end
return out
"#,
    )
});

/// Writes a copied thread into an empty target, whole, in one script:
/// `ARGV` tokens `N ns ens` (the namespace of what follows), `C id record
/// fields hasparent parent`, `B field value`, `W id field value`. Returns 0
/// (nothing written) when the target holds checkpoints.
pub(crate) static COPY_IN: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
if redis.call('ZCARD', b..':all') > 0 then return 0 end
local i, ns, ens = 1, nil, nil
while i <= #ARGV do
  local t = ARGV[i]
  if t == 'N' then
    ns, ens = ARGV[i + 1], ARGV[i + 2]
    redis.call('HSET', b..':nsx', ns, ens)
    i = i + 3
  elseif t == 'C' then
    local id = ARGV[i + 1]
    redis.call('ZADD', b..':all', 0, id..'\0'..ns)
    redis.call('ZADD', b..':ids:'..ens, 0, id)
    redis.call('HSET', b..':ck:'..ens, id, ARGV[i + 2])
    redis.call('HSET', b..':cf:'..ens, id, ARGV[i + 3])
    if ARGV[i + 4] == '1' then redis.call('HSET', b..':par:'..ens, id, ARGV[i + 5]) end
    i = i + 6
  elseif t == 'B' then
    redis.call('HSETNX', b..':bl:'..ens, ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  else
    redis.call('ZADD', b..':wi:'..ens, 0, ARGV[i + 1])
    redis.call('HSETNX', b..':w:'..ens..':'..ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])
    i = i + 4
  end
end
return 1
"#,
    )
});
