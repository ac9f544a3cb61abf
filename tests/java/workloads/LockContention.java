package workloads;

/**
 * Four threads take one shared monitor (a {@code LockContention$Hot}) and hold it ~200 µs,
 * so they wait for each other; each also takes its own monitor (a {@code LockContention$Cold})
 * that nobody else wants. Prints READY once running.
 */
public class LockContention {
    static final class Hot {}

    static final class Cold {}

    static final Hot HOT = new Hot();
    static volatile long sink;

    static void spin(long nanos) {
        long end = System.nanoTime() + nanos;
        while (System.nanoTime() < end) {
            sink++;
        }
    }

    static void hot() {
        synchronized (HOT) {
            spin(200_000);
        }
    }

    static void cold(Cold cold) {
        synchronized (cold) {
            spin(50_000);
        }
    }

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < 4; i++) {
            Thread t = new Thread(() -> {
                Cold mine = new Cold();
                while (true) {
                    hot();
                    cold(mine);
                }
            }, "locker-" + i);
            t.setDaemon(true);
            t.start();
        }
        System.out.println("READY");
        Thread.sleep(Long.MAX_VALUE);
    }
}
