package workloads;

import java.io.File;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.EventListener;
import javax.swing.event.EventListenerList;

/**
 * Targets for BTrace's classes and methods selected by annotation, {@code +Supertype}
 * callees at {@code Kind.CALL}, and {@code ${name}} arguments. Round N starts when a file
 * named {@code go<N>} appears in the working directory and ends by printing
 * {@code DONE <N> <result>}; each round calls {@link #round} once.
 */
public class Annotated {
    /** On endpoint classes; retained at run time. */
    @Retention(RetentionPolicy.RUNTIME)
    @Target(ElementType.TYPE)
    @interface Endpoint {}

    /** On request handling methods; retained at run time. */
    @Retention(RetentionPolicy.RUNTIME)
    @Target(ElementType.METHOD)
    @interface Handler {
        String value() default "";
    }

    /** Kept in the class file only: the JVM drops it, so no pattern selects by it. */
    @Retention(RetentionPolicy.CLASS)
    @Target(ElementType.METHOD)
    @interface Internal {}

    @Endpoint
    static final class Orders {
        @Handler("place")
        int place(int n) {
            return n * 2;
        }

        @Handler
        int cancel(int n) {
            return n - 1;
        }

        @Internal
        int audit(int n) {
            return n + 1;
        }

        int helper(int n) {
            return n;
        }
    }

    /** Not an endpoint: its handler is selected by a method annotation alone. */
    static final class Plain {
        @Handler
        int place(int n) {
            return n + 3;
        }
    }

    /** A map of the application's own, loaded before tracing starts. */
    static final class Ledger extends LinkedHashMap<String, Integer> {}

    /** A map first loaded by the first round, after its callers were instrumented. */
    static final class LateMap extends TreeMap<String, Integer> {}

    /** A put that is no map's. */
    static final class Registry {
        int size;

        void put(String key, Integer value) {
            size++;
        }
    }

    static int requests() {
        Orders orders = new Orders();
        return orders.place(5) + orders.cancel(5) + orders.audit(5) + orders.helper(5)
                + new Plain().place(1);
    }

    /** Puts into maps through an interface, classes of the JDK and of the application. */
    static int fill() {
        Map<String, Integer> map = new HashMap<>();
        map.put("map", 1);
        HashMap<String, Integer> hash = new HashMap<>();
        hash.put("hash", 2);
        Ledger ledger = new Ledger();
        ledger.put("ledger", 3);
        TreeMap<String, Integer> tree = new TreeMap<>();
        tree.put("tree", 4);
        LateMap late = new LateMap();
        late.put("late", 5);
        Registry registry = new Registry();
        registry.put("registry", 6);
        return map.size() + hash.size() + ledger.size() + tree.size() + late.size() + registry.size;
    }

    /** First loaded by the first round, after {@link LateMap}. */
    static final class Again {
        static int fill() {
            LateMap late = new LateMap();
            late.put("again", 7);
            return late.size();
        }
    }

    static final EventListenerList LISTENERS = new EventListenerList();

    static int round() {
        LISTENERS.add(EventListener.class, new EventListener() {});
        return requests() + fill() + Again.fill() + LISTENERS.getListenerCount();
    }

    public static void main(String[] args) throws Exception {
        // Loads the classes the probes meet, but LateMap.
        new Ledger().put("warm", 0);
        new TreeMap<String, Integer>().put("warm", 0);
        new Registry().put("warm", 0);
        LISTENERS.getListenerCount();
        System.out.println("READY");
        for (int n = 1; ; n++) {
            File go = new File("go" + n);
            while (!go.exists()) {
                Thread.sleep(10);
            }
            System.out.println("DONE " + n + " " + round());
        }
    }
}
