package workloads;

/**
 * Keeps native threads the JVM never sees busy in malloc (tests/native/native_threads.c, whose
 * path is the first argument). Prints READY once they run, then every 100 ms how many of
 * their short-lived threads have finished ("finished N"), so a test sees whether they still
 * make progress.
 */
public class NativeThreads {
    static native long finished();

    public static void main(String[] args) throws Exception {
        System.load(args[0]);
        System.out.println("READY");
        while (true) {
            Thread.sleep(100);
            System.out.println("finished " + finished());
        }
    }
}
