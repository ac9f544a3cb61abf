package jtap.verify;

/** The probe runtime used by the tests: counts calls, computes nothing. */
public final class Probes {
    public static long calls;

    static {
        if (System.getProperty("jtap.probes.report") != null) {
            Runtime.getRuntime().addShutdownHook(new Thread(() -> System.err.println("jtap-probes: " + calls)));
        }
    }

    private Probes() {}

    public static void entry(int method, Object self, Object[] args) { calls++; }
    public static void exit(int method, Object value) { calls++; }
    public static void thrown(int method, Throwable t) { calls++; }
    public static void beforeCall(int method, int site) { calls++; }
    public static void afterCall(int method, int site, Object value, Throwable t) { calls++; }
    public static void alloc(int method, int site, Object o) { calls++; }
    public static void monitor(int method, int site, Object lock) { calls++; }
    public static void field(int method, int site, Object value) { calls++; }
    public static void line(int method, int line) { calls++; }
}
