package real;

import java.util.concurrent.atomic.AtomicLong;

/**
 * What every real-program driver prints: {@code READY} once the program has done its first
 * unit of work, then {@code PROGRESS <units done>} every 250 ms, so a test can check that the
 * program kept working while jtap looked inside it. Failures of the program's own work are
 * printed on stderr with their stack trace (and not counted).
 */
final class Progress {
    private final AtomicLong done = new AtomicLong();

    /** One more unit of work done. */
    void add() {
        done.incrementAndGet();
    }

    /** Reports a failed unit of work on stderr. */
    static void failed(String what, Throwable e) {
        synchronized (System.err) {
            System.err.println(what + " failed: " + e);
            e.printStackTrace();
        }
    }

    /** Waits for the first unit of work, prints READY, then the count every 250 ms forever. */
    void reportForever() throws InterruptedException {
        while (done.get() == 0) {
            Thread.sleep(10);
        }
        System.out.println("READY");
        System.out.flush();
        while (true) {
            System.out.println("PROGRESS " + done.get());
            System.out.flush();
            Thread.sleep(250);
        }
    }

    /** Starts {@code count} daemon threads named {@code name-<i>} running {@code body}. */
    static void startThreads(String name, int count, Runnable body) {
        for (int i = 0; i < count; i++) {
            Thread thread = new Thread(body, name + "-" + i);
            thread.setDaemon(true);
            thread.start();
        }
    }
}
