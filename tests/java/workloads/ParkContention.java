package workloads;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * java.util.concurrent lock contention among waits that are not contention. Four threads take
 * one shared {@code ReentrantLock} in {@code hot()} and hold it ~200 µs, so they wait for each
 * other; each also takes its own {@code ReentrantLock} in {@code cold()} that nobody else
 * wants. Meanwhile threads wait without contention: two on a {@code Condition} of a lock of
 * their own (awaitNanos of 20 ms in a loop), one on a {@code CountDownLatch} (await of 20 ms
 * in a loop), and the two workers of a thread pool idle in {@code LinkedBlockingQueue.take},
 * woken by a task every 20 ms. With the argument {@code mixed}, the four threads also take one
 * shared monitor (a {@code ParkContention$Monitor}) in {@code monitor()}, held ~200 µs (give
 * {@code -} for none). A second argument makes it exit after that many seconds. Every 100 ms
 * prints "ops <epoch millis> <hot lock acquisitions>". Prints READY once running.
 */
public class ParkContention {
    static final class Monitor {}

    static final ReentrantLock HOT = new ReentrantLock();
    static final Monitor MONITOR = new Monitor();
    static final LongAdder OPS = new LongAdder();
    static volatile long sink;

    static void spin(long nanos) {
        long end = System.nanoTime() + nanos;
        while (System.nanoTime() < end) {
            sink++;
        }
    }

    static void hot() {
        HOT.lock();
        try {
            spin(200_000);
            OPS.increment();
        } finally {
            HOT.unlock();
        }
    }

    static void cold(ReentrantLock mine) {
        mine.lock();
        try {
            spin(50_000);
        } finally {
            mine.unlock();
        }
    }

    static void monitor() {
        synchronized (MONITOR) {
            spin(200_000);
        }
    }

    static void daemon(String name, Runnable body) {
        Thread thread = new Thread(body, name);
        thread.setDaemon(true);
        thread.start();
    }

    public static void main(String[] args) throws Exception {
        boolean mixed = args.length > 0 && args[0].equals("mixed");
        long seconds = args.length > 1 ? Long.parseLong(args[1]) : -1;
        long started = System.nanoTime();
        for (int i = 0; i < 4; i++) {
            daemon("locker-" + i, () -> {
                ReentrantLock mine = new ReentrantLock();
                while (true) {
                    hot();
                    cold(mine);
                    if (mixed) {
                        monitor();
                    }
                }
            });
        }
        for (int i = 0; i < 2; i++) {
            daemon("condition-waiter-" + i, () -> {
                ReentrantLock idle = new ReentrantLock();
                Condition never = idle.newCondition();
                while (true) {
                    idle.lock();
                    try {
                        never.awaitNanos(20_000_000);
                    } catch (InterruptedException e) {
                        return;
                    } finally {
                        idle.unlock();
                    }
                }
            });
        }
        CountDownLatch closed = new CountDownLatch(1);
        daemon("latch-waiter", () -> {
            while (true) {
                try {
                    closed.await(20, TimeUnit.MILLISECONDS);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        ExecutorService pool = new ThreadPoolExecutor(2, 2, 0, TimeUnit.MILLISECONDS,
                new LinkedBlockingQueue<>(), runnable -> {
                    Thread worker = new Thread(runnable, "pool-worker");
                    worker.setDaemon(true);
                    return worker;
                });
        System.out.println("READY");
        for (long tick = 0; seconds < 0 || System.nanoTime() - started < seconds * 1_000_000_000L; tick++) {
            Thread.sleep(20);
            pool.execute(() -> sink++);
            if (tick % 5 == 0) {
                System.out.println("ops " + System.currentTimeMillis() + " " + OPS.sum());
            }
        }
    }
}
