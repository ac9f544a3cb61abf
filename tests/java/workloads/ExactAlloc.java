package workloads;

import java.lang.reflect.Array;
import java.nio.file.Files;
import java.nio.file.Path;
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
 * sleeps until killed.
 */
public class ExactAlloc {
    static final int WIDGETS = 1000;
    static final int ARRAYS = 3000;
    static final int CLONES = 500;
    static final int REFLECTED = 250;

    static volatile Object sink;
    static final List<Object> KEPT = new ArrayList<>(WIDGETS + CLONES + REFLECTED);

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
        KEPT.add(new Widget(i));
    }

    static void arraySite(int i) {
        int[] a = new int[10];
        a[0] = i;
        sink = a;
    }

    static void cloneSite(Widget prototype) throws CloneNotSupportedException {
        KEPT.add(prototype.copy());
    }

    static void reflectSite() {
        KEPT.add(Array.newInstance(Gadget.class, 3));
    }

    public static void main(String[] args) throws Exception {
        Path trigger = Paths.get(args[0]);
        Widget prototype = new Widget(-1);
        System.out.println("READY");
        while (!Files.exists(trigger)) {
            Thread.sleep(10);
        }
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
        System.out.println("DONE");
        Thread.sleep(Long.MAX_VALUE);
    }
}
