package real;

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;

/**
 * Scala 2.11's compiler in a loop: {@code ScalacLoop <files>} compiles that many generated
 * Scala sources (case classes, pattern matches, closures, implicits) from memory, round after
 * round on one thread, with one resident compiler ({@code scala.tools.nsc.Global}, a new
 * {@code Run} each round), class files going to memory. The jars are Debian's ({@code
 * scala-compiler}, {@code scala-reflect}, {@code scala-library}); the compiler is called by
 * reflection, so that this driver compiles without them. One compiler means one symbol counter: every symbol the compiler creates
 * takes the next id ({@code Symbols$class.nextId}), so the ids a check sees returned tell
 * how many calls it should have seen. A round that reports an error is printed on stderr and
 * not counted. Progress: rounds done.
 */
public class ScalacLoop {
    public static void main(String[] args) throws Exception {
        int files = Integer.parseInt(args[0]);
        List<String> sources = new ArrayList<>();
        for (int i = 0; i < files; i++) {
            sources.add(source(i));
        }
        Compiler compiler = new Compiler(sources);
        Progress progress = new Progress();
        Progress.startThreads("scalac", 1, () -> {
            while (true) {
                try {
                    compiler.compile();
                    progress.add();
                } catch (Throwable e) {
                    Progress.failed("compiling", e);
                }
            }
        });
        progress.reportForever();
    }

    /** Source file {@code i}: a small program of its own package. */
    static String source(int i) {
        return "package shapes" + i + "\n"
            + "sealed trait Shape { def area: Double }\n"
            + "case class Circle(r: Double) extends Shape { def area = math.Pi * r * r }\n"
            + "case class Rect(w: Double, h: Double) extends Shape { def area = w * h }\n"
            + "case class Group(items: List[Shape]) extends Shape { def area = items.map(_.area).sum }\n"
            + "object Shapes {\n"
            + "  implicit class Scaled(val s: Shape) extends AnyVal {\n"
            + "    def scaled(k: Double): Shape = s match {\n"
            + "      case Circle(r) => Circle(r * k)\n"
            + "      case Rect(w, h) => Rect(w * k, h * k)\n"
            + "      case Group(xs) => Group(xs.map(x => new Scaled(x).scaled(k)))\n"
            + "    }\n"
            + "  }\n"
            + "  def describe(s: Shape): String = s match {\n"
            + "    case Circle(r) if r > " + i + " => \"big circle \" + r\n"
            + "    case Circle(r) => \"circle \" + r\n"
            + "    case Rect(w, h) => s\"rect $w x $h\"\n"
            + "    case Group(xs) => xs.map(describe).mkString(\"[\", \", \", \"]\")\n"
            + "  }\n"
            + "  def total(xs: Seq[Shape]): Double = xs.foldLeft(0.0)((a, s) => a + s.scaled(2).area)\n"
            + "  def table: Map[String, Int] = (1 to 20).map(n => (\"k\" + n, n * " + i + ")).toMap\n"
            + "  def main(args: Array[String]): Unit = {\n"
            + "    val xs = (1 to 10).toList.map(n => if (n % 2 == 0) Circle(n) else Rect(n, n + 1))\n"
            + "    println(describe(Group(xs)) + total(xs) + table.values.sum)\n"
            + "  }\n"
            + "}\n";
    }

    /**
     * A resident {@code scala.tools.nsc.Global} compiling the sources from memory into a
     * {@code VirtualDirectory}, a new {@code Run} each round.
     */
    static final class Compiler {
        private final Object reporter;
        private final Object global;
        private final Object sources;
        private final Constructor<?> newRun;
        private final Method compileSources;
        private final Method hasErrors;
        private final Method reset;

        Compiler(List<String> texts) throws Exception {
            Class<?> settingsClass = Class.forName("scala.tools.nsc.Settings");
            Object settings = settingsClass.getConstructor().newInstance();
            settingsClass.getMethod("processArgumentString", String.class).invoke(settings, "-usejavacp -nowarn");
            Class<?> abstractFile = Class.forName("scala.reflect.io.AbstractFile");
            Object none = Class.forName("scala.None$").getField("MODULE$").get(null);
            Object out = Class.forName("scala.reflect.io.VirtualDirectory")
                .getConstructor(String.class, Class.forName("scala.Option"))
                .newInstance("classes", none);
            Object outputDirs = settingsClass.getMethod("outputDirs").invoke(settings);
            outputDirs.getClass().getMethod("setSingleOutput", abstractFile).invoke(outputDirs, out);
            Class<?> reporterClass = Class.forName("scala.tools.nsc.reporters.ConsoleReporter");
            reporter = reporterClass.getConstructor(settingsClass).newInstance(settings);
            Class<?> globalClass = Class.forName("scala.tools.nsc.Global");
            global = globalClass
                .getConstructor(settingsClass, Class.forName("scala.tools.nsc.reporters.Reporter"))
                .newInstance(settings, reporter);
            Constructor<?> virtualFile = Class.forName("scala.reflect.io.VirtualFile").getConstructor(String.class, String.class);
            Constructor<?> sourceFile = Class.forName("scala.reflect.internal.util.BatchSourceFile")
                .getConstructor(abstractFile, char[].class);
            List<Object> files = new ArrayList<>();
            for (int i = 0; i < texts.size(); i++) {
                String name = "Shapes" + i + ".scala";
                files.add(sourceFile.newInstance(virtualFile.newInstance(name, "/shapes/" + name), texts.get(i).toCharArray()));
            }
            Object buffer = Class.forName("scala.collection.JavaConversions").getMethod("asScalaBuffer", List.class).invoke(null, files);
            sources = Class.forName("scala.collection.TraversableOnce").getMethod("toList").invoke(buffer);
            Class<?> runClass = Class.forName("scala.tools.nsc.Global$Run");
            newRun = runClass.getConstructor(globalClass);
            compileSources = runClass.getMethod("compileSources", Class.forName("scala.collection.immutable.List"));
            hasErrors = reporterClass.getMethod("hasErrors");
            reset = reporterClass.getMethod("reset");
        }

        void compile() throws Exception {
            reset.invoke(reporter);
            compileSources.invoke(newRun.newInstance(global), sources);
            if ((Boolean) hasErrors.invoke(reporter)) {
                throw new IllegalStateException("scalac reported errors");
            }
        }
    }
}
