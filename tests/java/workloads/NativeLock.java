package workloads;

/**
 * Threads contending on a pthread mutex in a JNI library (tests/native/native_lock.c, whose
 * path is the first argument): four threads call {@code contendSite}, which holds the shared
 * mutex for 1 ms at a time, so each waits for the others; the main thread calls
 * {@code aloneSite}, which takes an uncontended mutex of its own 1000 times, then sleeps
 * 1 ms. Prints READY once running.
 */
public class NativeLock {
    static native void contend(int micros);

    static native void alone(int count);

    static void contendSite() {
        contend(1000);
    }

    static void aloneSite() {
        alone(1000);
    }

    public static void main(String[] args) throws Exception {
        System.load(args[0]);
        for (int i = 0; i < 4; i++) {
            Thread t = new Thread(() -> {
                while (true) {
                    contendSite();
                }
            }, "contender-" + i);
            t.setDaemon(true);
            t.start();
        }
        System.out.println("READY");
        System.out.flush();
        while (true) {
            aloneSite();
            Thread.sleep(1);
        }
    }
}
