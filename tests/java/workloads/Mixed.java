package workloads;

import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;

/**
 * Every profiled event in a 1:2:4 ratio at once, for one session recording several engines:
 * CPU time and wall-clock time in {@code Burn.burnOne/burnTwo/burnFour} (Burn's baton), bytes
 * allocated in {@code AllocSites.intSite/longSite/byteSite} (paced to about 50 MiB/s), and time
 * waited for a monitor in {@code waitOne/waitTwo/waitFour}: a holder thread keeps monitor one
 * for 1 ms, two for 2 ms and four for 4 ms in turn, while one waiter per monitor asks for it
 * every 200 µs and so waits out most of each hold. Prints READY once running, then every 100 ms
 * a line {@code SPENT one two four}: the wall-clock nanoseconds spent so far in each burn method
 * ({@link Burn#SPENT}), and a line {@code HELD one two four}: the nanoseconds each monitor was
 * held (a loaded machine wakes the holder late, and a constant delay bends 1:2:4). Runs until
 * killed.
 */
public class Mixed {
    static final Object ONE = new Object();
    static final Object TWO = new Object();
    static final Object FOUR = new Object();
    static volatile long sink;
    static final AtomicLongArray HELD = new AtomicLongArray(3);

    public static void main(String[] args) throws Exception {
        Burn.THREADS[0] = new Thread(() -> Burn.take(0, 1), "burn-one");
        Burn.THREADS[1] = new Thread(() -> Burn.take(1, 2), "burn-two");
        Burn.THREADS[2] = new Thread(() -> Burn.take(2, 4), "burn-four");
        for (Thread t : Burn.THREADS) {
            t.setDaemon(true);
            t.start();
        }
        daemon(Mixed::allocate, "allocator");
        daemon(Mixed::hold, "holder");
        daemon(() -> forever(Mixed::waitOne), "waiter-one");
        daemon(() -> forever(Mixed::waitTwo), "waiter-two");
        daemon(() -> forever(Mixed::waitFour), "waiter-four");
        System.out.println("READY");
        while (true) {
            Thread.sleep(100);
            System.out.println(
                    "SPENT " + Burn.SPENT.get(0) + " " + Burn.SPENT.get(1) + " " + Burn.SPENT.get(2));
            System.out.println("HELD " + HELD.get(0) + " " + HELD.get(1) + " " + HELD.get(2));
        }
    }

    static void daemon(Runnable body, String name) {
        Thread thread = new Thread(body, name);
        thread.setDaemon(true);
        thread.start();
    }

    static void allocate() {
        long bytesPerRound = 7 * 1040;
        long perMillisecond = 50L * 1024 * 1024 / 1000 / bytesPerRound;
        long start = System.nanoTime();
        for (long round = 0; ; round++) {
            AllocSites.intSite();
            AllocSites.longSite();
            AllocSites.longSite();
            for (int i = 0; i < 4; i++) {
                AllocSites.byteSite();
            }
            if (round % perMillisecond == 0) {
                long ahead = round / perMillisecond - (System.nanoTime() - start) / 1_000_000;
                if (ahead > 0) {
                    LockSupport.parkNanos(ahead * 1_000_000);
                }
            }
        }
    }

    static void hold() {
        while (true) {
            holdFor(ONE, 0, 1);
            holdFor(TWO, 1, 2);
            holdFor(FOUR, 2, 4);
        }
    }

    static void holdFor(Object monitor, int index, long millis) {
        synchronized (monitor) {
            long start = System.nanoTime();
            LockSupport.parkNanos(millis * 1_000_000);
            HELD.addAndGet(index, System.nanoTime() - start);
        }
    }

    static void forever(Runnable step) {
        while (true) {
            step.run();
            LockSupport.parkNanos(200_000);
        }
    }

    static void waitOne() {
        synchronized (ONE) {
            sink++;
        }
    }

    static void waitTwo() {
        synchronized (TWO) {
            sink++;
        }
    }

    static void waitFour() {
        synchronized (FOUR) {
            sink++;
        }
    }
}
