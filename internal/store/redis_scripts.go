package store

import "github.com/redis/go-redis/v9"

// Every script receives the session's keys in redisKeys order (meta, counters, diagnostics,
// diagnostic kinds, blobs, lease) under one hash tag, so it runs on one Cluster slot. Numbers
// that may exceed 14 digits are formatted with %d (Lua's tostring uses exponent form).
const luaPrelude = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function touch(id, ttl, now)
  redis.call('HSET', KEYS[1], 'id', id, 'seen', string.format('%d', now))
  if ttl ~= '0' then
    for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ttl) end
  end
end
local function check_id(id)
  local stored = redis.call('HGET', KEYS[1], 'id')
  if stored and stored ~= id then
    return redis.error_reply('ERR condense: session key collision')
  end
  return nil
end
`

// load: ARGV id, ttl, touch-after ms, known version ('0': none). Returns {} for an unknown
// session, else {version, state (empty when version is the known one), seen, counters,
// diagnostics, kinds, lease, lease_pttl, now}; it touches only a last-seen older than touch-after.
var scriptLoad = redis.NewScript(luaPrelude + `
local m = redis.call('HMGET', KEYS[1], 'id', 'v', 'seen')
if not m[1] then return {} end
if m[1] ~= ARGV[1] then return redis.error_reply('ERR condense: session key collision') end
local now = now_ms()
local seen = tonumber(m[3] or '0')
if now - seen >= tonumber(ARGV[3]) then
  touch(ARGV[1], ARGV[2], now)
  seen = now
end
local st = ''
if ARGV[4] == '0' or m[2] ~= ARGV[4] then st = redis.call('HGET', KEYS[1], 's') or '' end
return {m[2] or '0', st, string.format('%d', seen),
  redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3]), redis.call('HGETALL', KEYS[4]),
  redis.call('GET', KEYS[6]) or '', redis.call('PTTL', KEYS[6]), string.format('%d', now)}
`)

// commit: ARGV id, expect, fence, state, ttl, channel.
// Returns {1, newVersion} | {0, storedVersion} (conflict) | {-1, currentToken} (fenced).
var scriptCommit = redis.NewScript(luaPrelude + `
local e = check_id(ARGV[1]); if e then return e end
local cur = redis.call('HGET', KEYS[1], 'v') or '0'
if cur ~= ARGV[2] then return {0, cur} end
if ARGV[3] ~= '0' then
  local f = redis.call('HGET', KEYS[1], 'f') or '0'
  if f ~= ARGV[3] then return {-1, f} end
end
-- Version, state, id and last-seen change in ONE absolute HSET: if the AOF tail holding this
-- script's MULTI block is torn and a later block is appended (Redis 7.0 keeps a truncated
-- MULTI's prefix; see docs/store.md), a replayed prefix is a whole commit, never a bumped
-- version without its state.
local nv = string.format('%d', tonumber(cur) + 1)
redis.call('HSET', KEYS[1], 'v', nv, 's', ARGV[4], 'id', ARGV[1], 'seen', string.format('%d', now_ms()))
if ARGV[5] ~= '0' then
  for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ARGV[5]) end
end
redis.call('PUBLISH', ARGV[6], 'c' .. nv .. ':' .. ARGV[1])
return {1, nv}
`)

// diagnostics: ARGV id, ttl, channel, then triples (key, kind, payload). Returns the number added.
var scriptDiag = redis.NewScript(luaPrelude + `
local e = check_id(ARGV[1]); if e then return e end
local added = 0
for i = 4, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[3], ARGV[i], ARGV[i + 2]) == 1 then
    redis.call('HINCRBY', KEYS[4], ARGV[i + 1], 1)
    added = added + 1
  end
end
touch(ARGV[1], ARGV[2], now_ms())
if added > 0 then
  redis.call('PUBLISH', ARGV[3], 'd' .. (redis.call('HGET', KEYS[1], 'v') or '0') .. ':' .. ARGV[1])
end
return added
`)

// updatestats: ARGV id, ttl, number of increments, number of sets, then (name, value) pairs:
// increments, sets, maxima (set when larger). Values compare exactly as decimal integers, and
// an increment past int64 fails the whole call before anything is written.
var scriptUpdateStats = redis.NewScript(luaPrelude + `
local e = check_id(ARGV[1]); if e then return e end
local function lt(a, b)
  local an, bn = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if an ~= bn then return an end
  if an then a, b = string.sub(b, 2), string.sub(a, 2) end
  if #a ~= #b then return #a < #b end
  return a < b
end
local function split(a)
  local neg = string.sub(a, 1, 1) == '-'
  if neg then a = string.sub(a, 2) end
  local n = #a
  local hi = 0
  if n > 9 then hi = tonumber(string.sub(a, 1, n - 9)) end
  return neg, hi, tonumber(string.sub(a, math.max(1, n - 8)))
end
local function fits(a, b)
  local an, ah, al = split(a)
  local bn, bh, bl = split(b)
  if an ~= bn then return true end
  local h, l = ah + bh, al + bl
  if l >= 1e9 then h, l = h + 1, l - 1e9 end
  local ml = 854775807
  if an then ml = 854775808 end
  return h < 9223372036 or (h == 9223372036 and l <= ml)
end
local ni, ns = tonumber(ARGV[3]), tonumber(ARGV[4])
local i = 5
for _ = 1, ni do
  local cur = redis.call('HGET', KEYS[2], ARGV[i])
  if cur and (not string.match(cur, '^-?%d+$') or #cur > 20 or not fits(cur, ARGV[i + 1])) then
    return redis.error_reply('ERR condense: counter overflow: ' .. ARGV[i])
  end
  i = i + 2
end
i = 5
for _ = 1, ni do redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1]); i = i + 2 end
for _ = 1, ns do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]); i = i + 2 end
while i < #ARGV do
  local cur = redis.call('HGET', KEYS[2], ARGV[i])
  if not cur or lt(cur, ARGV[i + 1]) then redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
  i = i + 2
end
touch(ARGV[1], ARGV[2], now_ms())
return 1
`)

// delblob: ARGV id, key. Removes the blob; nothing else changes.
var scriptDelBlob = redis.NewScript(luaPrelude + `
local e = check_id(ARGV[1]); if e then return e end
return redis.call('HDEL', KEYS[5], ARGV[2])
`)

// putblob: ARGV id, ttl, key, value.
var scriptPutBlob = redis.NewScript(luaPrelude + `
local e = check_id(ARGV[1]); if e then return e end
redis.call('HSET', KEYS[5], ARGV[3], ARGV[4])
touch(ARGV[1], ARGV[2], now_ms())
return 1
`)

// acquire: ARGV id, ttl, owner, lease ms. The lease value is "<token> <owner>".
// Returns {1, token, expiresMs} | {0, token, owner, expiresMs} (held by another owner).
var scriptAcquire = redis.NewScript(luaPrelude + `
local e = check_id(ARGV[1]); if e then return e end
local now = now_ms()
local cur = redis.call('GET', KEYS[6])
if cur then
  local sp = string.find(cur, ' ', 1, true)
  local tok, own = string.sub(cur, 1, sp - 1), string.sub(cur, sp + 1)
  if own ~= ARGV[3] then
    return {0, tok, own, string.format('%d', now + redis.call('PTTL', KEYS[6]))}
  end
  redis.call('PEXPIRE', KEYS[6], ARGV[4])
  touch(ARGV[1], ARGV[2], now)
  return {1, tok, string.format('%d', now + tonumber(ARGV[4]))}
end
local f = tonumber(redis.call('HGET', KEYS[1], 'f') or '0')
local t = redis.call('TIME')
local tok = math.max(f + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
local ts = string.format('%d', tok)
redis.call('HSET', KEYS[1], 'f', ts)
redis.call('SET', KEYS[6], ts .. ' ' .. ARGV[3], 'PX', ARGV[4])
touch(ARGV[1], ARGV[2], now)
return {1, ts, string.format('%d', now + tonumber(ARGV[4]))}
`)

// renew: ARGV value ("<token> <owner>"), lease ms. Returns expiresMs or 0 when lost.
var scriptRenew = redis.NewScript(luaPrelude + `
if redis.call('GET', KEYS[6]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[6], ARGV[2])
return string.format('%d', now_ms() + tonumber(ARGV[2]))
`)

// release: ARGV value. Returns 1 when released, 0 when the lease was not held by that value.
var scriptRelease = redis.NewScript(`
if redis.call('GET', KEYS[6]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[6])
return 1
`)

// delete: ARGV id, channel. Returns the number of keys removed.
var scriptDelete = redis.NewScript(luaPrelude + `
local e = check_id(ARGV[1]); if e then return e end
local n = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
if n > 0 then redis.call('PUBLISH', ARGV[2], 'x0:' .. ARGV[1]) end
return n
`)

var allScripts = []*redis.Script{scriptLoad, scriptCommit, scriptDiag, scriptUpdateStats, scriptPutBlob, scriptDelBlob,
	scriptAcquire, scriptRenew, scriptRelease, scriptDelete}
