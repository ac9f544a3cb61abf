package workloads;

/** Prints READY, runs a few explicit garbage collections, prints DONE and exits with 0. */
public class GcBurst {
    public static void main(String[] args) throws Exception {
        System.out.println("READY");
        int collections = args.length > 0 ? Integer.parseInt(args[0]) : 3;
        for (int i = 0; i < collections; i++) {
            System.gc();
            Thread.sleep(20);
        }
        System.out.println("DONE");
    }
}
