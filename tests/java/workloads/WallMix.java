package workloads;

/**
 * One thread sleeping and one spinning, for wall-clock profiling: both should get the same
 * share of wall time. Prints READY and runs until killed.
 */
public class WallMix {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        Thread sleeper = new Thread(WallMix::sleepForever, "wall-sleeper");
        Thread spinner = new Thread(WallMix::spinForever, "wall-spinner");
        sleeper.setDaemon(true);
        spinner.setDaemon(true);
        sleeper.start();
        spinner.start();
        System.out.println("READY");
        sleeper.join();
    }

    static void sleepForever() {
        while (true) {
            try {
                Thread.sleep(1000);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    static void spinForever() {
        long x = 0;
        while (true) {
            x = x * 31 + 7;
            if ((x & 0xffff) == 0) {
                sink = x;
            }
        }
    }
}
