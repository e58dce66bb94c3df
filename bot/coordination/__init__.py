"""What replicas share when `REDIS_URL` is set: the workspace's rate windows, one per Slack
method we pace (`chat.update`, `chat.appendStream`, `chat.startStream`, `chat.stopStream` and
every other method's minute), and a token bucket per channel for `chat.postMessage` (Slack: "1
per second per channel, short bursts allowed"): two replicas together stay within Slack's
limits, and a 429 pauses that method (or channel) on both. The lock that keeps one thread's
turns in order is `bot.thread_locks`. Without Redis all of them live in the process.

Every time those shared windows and buckets keep is the Redis server's (`TIME` inside the Lua
scripts that check and record a call, count what is free, pause a method and count the
replicas), never a replica's: replicas whose clocks disagree by minutes still share fairly.

If Redis stops answering (every call has a socket time-out, so a hung Redis cannot stall a
reply), each replica falls back to its own window or bucket, sized to its share (the limit
divided by the replicas last seen alive), and to its own lock, and says so in the log; replies
keep flowing, only the cross-replica guarantee is lost until Redis is back.

| module | what |
|---|---|
| `windows` | the `Window` protocol every budget takes slots from; `LocalWindow` (sliding) |
| `buckets` | `LocalBucket`, `RedisBucket`: token buckets behind the same protocol |
| `redis_window` | `RedisWindow`: the sliding window in a Redis sorted set |
| `redis_shared` | the client, its breaker, the server's clock and what every shared kind shares |
"""

from bot.coordination.buckets import LocalBucket, RedisBucket
from bot.coordination.redis_shared import (
    REDIS_NOW,
    REDIS_TIMEOUT_SECONDS,
    Breaker,
    redis_client,
)
from bot.coordination.redis_window import RedisWindow
from bot.coordination.windows import LocalWindow, Window

__all__ = [
    "REDIS_NOW",
    "REDIS_TIMEOUT_SECONDS",
    "Breaker",
    "LocalBucket",
    "LocalWindow",
    "RedisBucket",
    "RedisWindow",
    "Window",
    "redis_client",
]
