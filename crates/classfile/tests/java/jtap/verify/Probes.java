package jtap.verify;

import java.util.ArrayList;
import java.util.List;

/**
 * The probe runtime used by the tests: counts calls; with -Djtap.probes.log=1 also prints each
 * call's values to stderr (objects other than boxes and strings by class name only, so a probe
 * never runs instrumented code).
 */
public final class Probes {
    public static long calls;
    /** The plans' clock field: advanced by every probe call. */
    public static long clock;

    /** The same clock read through a method (plans whose entry calls their clock). */
    public static long clock() { return clock; }
    static final boolean LOG = System.getProperty("jtap.probes.log") != null;

    static {
        if (System.getProperty("jtap.probes.report") != null) {
            Runtime.getRuntime().addShutdownHook(new Thread(() -> System.err.println("jtap-probes: " + calls)));
        }
    }

    private Probes() {}

    static String show(Object o) {
        if (o == null || o instanceof Number || o instanceof Boolean || o instanceof Character || o instanceof String) {
            return String.valueOf(o);
        }
        if (o instanceof Throwable) {
            return o.getClass().getName() + ": " + ((Throwable) o).getMessage();
        }
        if (o instanceof Object[]) {
            List<String> v = new ArrayList<>();
            for (Object e : (Object[]) o) {
                v.add(show(e));
            }
            return v.toString();
        }
        return o.getClass().getName();
    }

    static void log(String kind, int method, Object a, Object b, Object c) {
        calls++;
        clock++;
        if (LOG) {
            System.err.println("probe " + kind + " " + method + " " + show(a) + " " + show(b) + " " + show(c));
        }
    }

    public static void entry(int method, Object self, Object[] args) { log("entry", method, self, args, null); }
    public static void exit(int method, Object value) { log("exit", method, value, null, null); }
    public static void thrown(int method, Throwable t) { log("thrown", method, t, null, null); }
    public static void leave(long mark, int method) { log("leave", method, clock - mark, null, null); }
    public static void leaveThrown(long mark, int method, Throwable t) { log("leaveThrown", method, clock - mark, t, null); }
    public static void beforeCall(int method, int site) { log("beforeCall", method, site, null, null); }
    public static void afterCall(int method, int site, Object value, Throwable t) { log("afterCall", method, site, value, t); }
    public static void callee(int method, Object target, Object[] args) { log("callee", method, target, args, null); }
    public static void calleeAfter(int method, Object target, Object[] args, Object value) { log("calleeAfter", method, target, args, value); }
    public static void alloc(int method, int site, Object o) { log("alloc", method, site, o, null); }
    public static void monitor(int method, int site, Object lock) { log("monitor", method, site, lock, null); }
    public static void field(int method, int site, Object value) { log("field", method, site, value, null); }
    public static void fieldTarget(int method, Object self, Object target, Object value) { log("fieldTarget", method, self, target, value); }
    public static void line(int method, int line) { log("line", method, line, null, null); }
}
