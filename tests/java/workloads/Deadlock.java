package workloads;

/**
 * Two threads, {@code lock-ab} and {@code lock-ba}, that take two monitors in opposite
 * orders and deadlock; READY once both are blocked, then the JVM idles.
 */
public class Deadlock {
    static final Object A = new Object();
    static final Object B = new Object();

    static void both(Object first, Object second) {
        synchronized (first) {
            sleep(100);
            synchronized (second) {
                System.out.println("unreachable");
            }
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    public static void main(String[] args) throws Exception {
        Thread ab = new Thread(() -> both(A, B), "lock-ab");
        Thread ba = new Thread(() -> both(B, A), "lock-ba");
        ab.setDaemon(true);
        ba.setDaemon(true);
        ab.start();
        ba.start();
        while (ab.getState() != Thread.State.BLOCKED || ba.getState() != Thread.State.BLOCKED) {
            Thread.sleep(10);
        }
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
