package workloads;

import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * What an on-call engineer meets: one hot thread ({@code hot-worker}) burning a core, four
 * idle ones ({@code idle-0..3}) sleeping, {@code allocator} allocating 1 KiB a millisecond
 * (1000 KiB/s) at little CPU, {@code monitor-waiter} blocked on a monitor
 * {@code monitor-holder} keeps, and {@code lock-waiter} parked on a ReentrantLock
 * {@code lock-holder} keeps. READY once both waiters wait.
 */
public class OnCall {
    static final Object MONITOR = new Object();
    static final ReentrantLock LOCK = new ReentrantLock();
    static volatile long sink;
    static volatile byte[] garbage;

    /** A field and a static for the class and inspection tools to find. */
    static int requestsServed = 42;
    private final String owner;
    static OnCall current;

    OnCall(String owner) {
        this.owner = owner;
    }

    public String owner() {
        return owner;
    }

    static long spin(long x) {
        for (int i = 0; i < 1000; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            x ^= x >>> 29;
        }
        return x;
    }

    static void sleepForever() {
        try {
            Thread.sleep(Long.MAX_VALUE);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static Thread daemon(String name, Runnable body) {
        Thread thread = new Thread(body, name);
        thread.setDaemon(true);
        thread.start();
        return thread;
    }

    public static void main(String[] args) throws Exception {
        daemon("hot-worker", () -> {
            long x = 1;
            while (true) {
                x = spin(x);
                sink = x;
            }
        });
        for (int i = 0; i < 4; i++) {
            daemon("idle-" + i, OnCall::sleepForever);
        }
        daemon("allocator", () -> {
            long start = System.nanoTime();
            for (long round = 0; ; round++) {
                garbage = new byte[1024 - 16];
                long ahead = round - (System.nanoTime() - start) / 1_000_000;
                if (ahead > 0) {
                    LockSupport.parkNanos(ahead * 1_000_000);
                }
            }
        });
        Thread monitorHolder = daemon("monitor-holder", () -> {
            synchronized (MONITOR) {
                sleepForever();
            }
        });
        while (monitorHolder.getState() != Thread.State.TIMED_WAITING) {
            Thread.sleep(10);
        }
        Thread monitorWaiter = daemon("monitor-waiter", () -> {
            synchronized (MONITOR) {
                sink++;
            }
        });
        Thread lockHolder = daemon("lock-holder", () -> {
            LOCK.lock();
            sleepForever();
        });
        while (!LOCK.isLocked()) {
            Thread.sleep(10);
        }
        Thread lockWaiter = daemon("lock-waiter", () -> {
            LOCK.lock();
            sink++;
        });
        while (monitorWaiter.getState() != Thread.State.BLOCKED
                || lockWaiter.getState() != Thread.State.WAITING) {
            Thread.sleep(10);
        }
        current = new OnCall("main");
        System.out.println("READY");
        System.out.flush();
        sleepForever();
    }
}
