-- A read hold n of a field lives while its timeout key
-- "<base>:<field>:rwlock_timeout:<n>" does (lua/rwlock_read_acquire.lua):
-- a field none of whose timeout keys is left holds nothing. Its lease ran
-- out unrenewed - its owner let go and the release never landed, was cut
-- off, or died - and Redisson's read release already counts it so (the
-- lock's expiry comes from the timeout keys left). Left in the hash, it
-- would outlive its lease for as long as other readers keep the lock:
-- Redis would show a reader nobody is, and its owner reading again would
-- count a hold it does not have. drop_dead_readers(key, base) removes such
-- fields of a lock in read mode (a writer's own read holds are its
-- business while it writes) and returns how many live readers are left;
-- a lock left with none is deleted (nobody holds it). Needs base_of
-- (lua/shared/suffix_name.lua) for base. The scripts that meet readers
-- call it: a read hold's renewal, a read acquisition, a write try.
local function drop_dead_readers(key, base)
  if redis.call('hget', key, 'mode') ~= 'read' then
    return -1
  end
  local all = redis.call('hgetall', key)
  local live = 0
  for i = 1, #all, 2 do
    local count = tonumber(all[i + 1])
    if all[i] ~= 'mode' and count then
      local alive = false
      for k = count, 1, -1 do
        if redis.call('exists', base .. ':' .. all[i] .. ':rwlock_timeout:' .. k) == 1 then
          alive = true
          break
        end
      end
      if alive then
        live = live + 1
      else
        redis.call('hdel', key, all[i])
      end
    end
  end
  if live == 0 then
    redis.call('del', key)
  end
  return live
end
