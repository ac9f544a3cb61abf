package real;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.InetSocketAddress;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.AbstractHandler;

/**
 * An embedded Jetty 9.4 server under load: {@code JettyLoad <clients>} serves
 * {@code /work?n=<k>} on 127.0.0.1 (an ephemeral port) with {@link WorkHandler}, which hashes
 * its input k times and answers with the digest and a long, multi-line response header
 * (so traced values describing the response's header fields are long and multi-line);
 * the client threads request it in a loop over keep-alive connections
 * ({@code HttpURLConnection}) and check each answer. Progress: successful requests.
 */
public class JettyLoad {
    public static void main(String[] args) throws Exception {
        int clients = Integer.parseInt(args[0]);
        int port = serve(new WorkHandler());
        Progress progress = new Progress();
        Progress.startThreads("http-client", clients, () -> {
            int request = 0;
            while (true) {
                try {
                    int n = 1 + (request++ % 50);
                    String body = get(new URL("http://127.0.0.1:" + port + "/work?n=" + n));
                    if (!body.equals(WorkHandler.digest(n) + "\n")) {
                        throw new IllegalStateException("wrong answer for n=" + n + ": " + body);
                    }
                    progress.add();
                } catch (Throwable e) {
                    Progress.failed("request", e);
                }
            }
        });
        progress.reportForever();
    }

    /** Starts a quiet server of {@code handler} on a free local port; the port. */
    static int serve(Handler handler) throws Exception {
        System.setProperty("org.eclipse.jetty.util.log.announce", "false");
        System.setProperty("org.eclipse.jetty.LEVEL", "WARN");
        Server server = new Server(new InetSocketAddress("127.0.0.1", 0));
        server.setHandler(handler);
        server.start();
        return ((ServerConnector) server.getConnectors()[0]).getLocalPort();
    }

    /**
     * Has {@code clients} threads request {@code endpoints} of the server on {@code port} in
     * turn, forever, and reports the requests done (READY, then PROGRESS).
     */
    static void requestInTurn(int clients, int port, String... endpoints) throws InterruptedException {
        Progress progress = new Progress();
        Progress.startThreads("http-client", clients, () -> {
            int request = 0;
            while (true) {
                try {
                    String endpoint = endpoints[request++ % endpoints.length];
                    get(new URL("http://127.0.0.1:" + port + endpoint));
                    progress.add();
                } catch (Throwable e) {
                    Progress.failed("request", e);
                }
            }
        });
        progress.reportForever();
    }

    static String get(URL url) throws IOException {
        HttpURLConnection connection = (HttpURLConnection) url.openConnection();
        connection.setConnectTimeout(10_000);
        connection.setReadTimeout(30_000);
        int status = connection.getResponseCode();
        try (InputStream in = status == 200 ? connection.getInputStream() : connection.getErrorStream()) {
            ByteArrayOutputStream body = new ByteArrayOutputStream();
            in.transferTo(body);
            if (status != 200) {
                throw new IOException("HTTP " + status + ": " + body);
            }
            return body.toString(StandardCharsets.UTF_8);
        }
    }

    /** Hashes its input {@code n} times and answers with the digest. */
    public static class WorkHandler extends AbstractHandler {
        /** A header of about 1000 characters (folded values are not allowed: one long line). */
        static final String NOTE = "x".repeat(1000);

        @Override
        public void handle(String target, Request base, HttpServletRequest request, HttpServletResponse response)
                throws IOException {
            int n = Integer.parseInt(request.getParameter("n"));
            response.setContentType("text/plain");
            response.setCharacterEncoding("UTF-8");
            response.setHeader("X-Note", NOTE);
            response.getWriter().println(digest(n));
            base.setHandled(true);
        }

        static String digest(int n) {
            try {
                MessageDigest sha = MessageDigest.getInstance("SHA-256");
                byte[] value = ("request " + n).getBytes(StandardCharsets.UTF_8);
                for (int i = 0; i < n * 20; i++) {
                    value = sha.digest(value);
                }
                StringBuilder hex = new StringBuilder();
                for (byte b : value) {
                    hex.append(String.format("%02x", b));
                }
                return hex.toString();
            } catch (NoSuchAlgorithmException e) {
                throw new IllegalStateException(e);
            }
        }
    }
}
