package real;

import java.io.IOException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.handler.AbstractHandler;

/**
 * An embedded Jetty 9.4 server with a deliberate leak, for {@code jtap leaks}: {@code /remember}
 * keeps a 4 KiB session record per request in a static map nothing ever clears
 * ({@link #remember}); {@code /forget} makes an equal record per request and lets it go with
 * the next request ({@link #forget}). {@code JettyLeak <clients>} requests the two in turn
 * from that many client threads; prints READY once the server answers.
 */
public class JettyLeak {
    static final Map<Long, byte[]> SESSIONS = new ConcurrentHashMap<>();
    static final AtomicLong NEXT = new AtomicLong();
    /** The last forgotten record: it escapes, so the JIT cannot elide its allocation. */
    static volatile byte[] last;

    static int remember(String target) {
        byte[] record = new byte[4096];
        record[0] = (byte) target.length();
        SESSIONS.put(NEXT.incrementAndGet(), record);
        return record.length;
    }

    static int forget(String target) {
        byte[] record = new byte[4096];
        record[0] = (byte) target.length();
        last = record;
        return record.length;
    }

    /** Serves both endpoints. */
    public static class Sessions extends AbstractHandler {
        @Override
        public void handle(String target, Request base, HttpServletRequest request, HttpServletResponse response)
                throws IOException {
            int kept = target.equals("/remember") ? remember(target) : forget(target);
            response.setContentType("text/plain");
            response.setStatus(200);
            response.getWriter().println(kept);
            base.setHandled(true);
        }
    }

    public static void main(String[] args) throws Exception {
        int clients = Integer.parseInt(args[0]);
        JettyLoad.requestInTurn(clients, JettyLoad.serve(new Sessions()), "/remember", "/forget");
    }
}
