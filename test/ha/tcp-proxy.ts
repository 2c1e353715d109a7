/**
 * A TCP forwarder on 127.0.0.1: the nodes reach the database through it, as production reaches a
 * primary through a name or an address that moves (a DNS name, a virtual IP, a pooler). `retarget`
 * points it at another server and cuts every connection it carries, as a moved address does.
 */
import * as net from "node:net"

export interface TcpProxy {
  readonly port: number
  readonly retarget: (port: number) => void
  readonly close: () => Promise<void>
}

export const startTcpProxy = (target: number): Promise<TcpProxy> =>
  new Promise((resolve) => {
    let to = target
    const open = new Set<net.Socket>()
    const server = net.createServer((client) => {
      const upstream = net.connect(to, "127.0.0.1")
      for (const s of [client, upstream]) {
        open.add(s)
        s.on("close", () => open.delete(s))
        s.on("error", () => s.destroy())
      }
      client.pipe(upstream).pipe(client)
      client.on("close", () => upstream.destroy())
      upstream.on("close", () => client.destroy())
    })
    server.listen(0, "127.0.0.1", () => {
      resolve({
        port: (server.address() as net.AddressInfo).port,
        retarget: (port) => {
          to = port
          for (const s of open) s.destroy()
        },
        close: () =>
          new Promise<void>((done) => {
            for (const s of open) s.destroy()
            server.close(() => done())
          })
      })
    })
  })
