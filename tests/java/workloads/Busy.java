package workloads;

/** A small service-like workload for demos: worker threads hashing, one named per task. */
public class Busy {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : Long.MAX_VALUE / 1000;
        for (String name : new String[] {"orders", "payments"}) {
            Thread t = new Thread(() -> {
                long x = 0;
                while (true) {
                    x = mix(x);
                    sink = x;
                }
            }, "worker-" + name);
            t.setDaemon(true);
            t.start();
        }
        System.out.println("READY");
        System.out.flush();
        Thread.sleep(seconds * 1000);
    }

    static long mix(long x) {
        for (int i = 0; i < 1000; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            x ^= x >>> 29;
        }
        return x;
    }
}
