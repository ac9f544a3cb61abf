package real;

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A Groovy 2.4 script run again and again: {@code GroovyLoop} evaluates {@link #SCRIPT} with a
 * new {@code GroovyShell} each run, round after round on one thread, as a program running
 * user scripts does: every run compiles the script anew and loads its classes ({@code
 * workload}, its closures {@code workload$_run_closure1}, ...) from a class loader of its
 * own, so the JVM holds many classes of each name, each with other bytes (Groovy puts the
 * compile time in them). Groovy is Debian's {@code groovy} jar, called by reflection so that
 * this driver compiles without it. The script's {@code nextCall()} returns the next number of
 * one counter each call ({@link #CALLS}, across runs), so the numbers a check sees returned
 * tell how many calls it should have seen. A run that fails is printed on stderr and not
 * counted. Progress: runs done.
 */
public class GroovyLoop {
    /** Numbers handed to the script's {@code step}: one per call, from 1. */
    public static final AtomicLong CALLS = new AtomicLong();

    static final String SCRIPT = String.join("\n",
        "long nextCall() { calls.incrementAndGet() }",
        "long step(long seq, int x) { (x * seq) % 7 }",
        "def words = ['alpha', 'beta', 'gamma', 'delta', 'epsilon']",
        "long total = 0",
        "(1..8).each { int i ->",
        "    def xs = (1..20000).collect { it * i }.findAll { it % 3 != 0 }",
        "    xs.each { int x -> total += step(nextCall(), x) }",
        "    def text = words.collect { w -> w * (i % 3 + 1) }.join(',')",
        "    total += text.split(',').inject(0) { acc, w -> acc + w.size() }",
        "}",
        "def byLength = words.groupBy { it.size() }.collectEntries { k, v -> [k, v.size()] }",
        "total + byLength.size()",
        "");

    public static void main(String[] args) throws Exception {
        Class<?> shellClass = Class.forName("groovy.lang.GroovyShell");
        Class<?> bindingClass = Class.forName("groovy.lang.Binding");
        Constructor<?> newShell = shellClass.getConstructor(bindingClass);
        Method evaluate = shellClass.getMethod("evaluate", String.class, String.class);
        Method setVariable = bindingClass.getMethod("setVariable", String.class, Object.class);
        Progress progress = new Progress();
        Progress.startThreads("groovy", 1, () -> {
            while (true) {
                try {
                    Object binding = bindingClass.getConstructor().newInstance();
                    setVariable.invoke(binding, "calls", CALLS);
                    Object shell = newShell.newInstance(binding);
                    evaluate.invoke(shell, SCRIPT, "workload.groovy");
                    progress.add();
                } catch (Throwable e) {
                    Progress.failed("running the script", e);
                }
            }
        });
        progress.reportForever();
    }
}
