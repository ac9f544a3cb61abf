package workloads;

import java.lang.reflect.Array;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

/**
 * Allocates known numbers of objects from known sites once a trigger file (first argument)
 * appears, for checking exact allocation counts: {@code widgetSite} 1000 Widgets (kept),
 * {@code arraySite} 3000 int[10] (dropped), {@code cloneSite} 500 Widgets made by
 * {@code Object.clone()} (kept; the VM allocates them), {@code reflectSite} 250 Gadget[3]
 * made by {@code Array.newInstance} (kept; the VM allocates them). Every object escapes, so
 * none is removed by escape analysis. Prints READY when waiting and DONE when finished, then
 * sleeps until killed. With "-" instead of a trigger file it starts at once, allocates all
 * that as many times as the second argument says (default 1) and exits after DONE.
 */
public class ExactAlloc {
    static final int WIDGETS = 1000;
    static final int ARRAYS = 3000;
    static final int CLONES = 500;
    static final int REFLECTED = 250;

    static volatile Object sink;
    static List<Object> kept;

    static final class Widget implements Cloneable {
        long id;

        Widget(long id) {
            this.id = id;
        }

        Widget copy() throws CloneNotSupportedException {
            return (Widget) clone();
        }
    }

    static final class Gadget {}

    static void widgetSite(int i) {
        kept.add(new Widget(i));
    }

    static void arraySite(int i) {
        int[] a = new int[10];
        a[0] = i;
        sink = a;
    }

    static void cloneSite(Widget prototype) throws CloneNotSupportedException {
        kept.add(prototype.copy());
    }

    static void reflectSite() {
        kept.add(Array.newInstance(Gadget.class, 3));
    }

    public static void main(String[] args) throws Exception {
        boolean once = args[0].equals("-");
        int rounds = once && args.length > 1 ? Integer.parseInt(args[1]) : 1;
        kept = new ArrayList<>((WIDGETS + CLONES + REFLECTED) * rounds);
        Widget prototype = new Widget(-1);
        System.out.println("READY");
        while (!once && !Files.exists(Paths.get(args[0]))) {
            Thread.sleep(10);
        }
        for (int round = 0; round < rounds; round++) {
            for (int i = 0; i < WIDGETS; i++) {
                widgetSite(i);
            }
            for (int i = 0; i < ARRAYS; i++) {
                arraySite(i);
            }
            for (int i = 0; i < CLONES; i++) {
                cloneSite(prototype);
            }
            for (int i = 0; i < REFLECTED; i++) {
                reflectSite();
            }
        }
        System.out.println("DONE");
        if (!once) {
            Thread.sleep(Long.MAX_VALUE);
        }
    }
}
